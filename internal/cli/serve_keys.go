package cli

import (
	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/config"
	"github.com/execbox/execbox/internal/server"
)

// serverKeys carries the configured API keys to the server: their
// hashes (a key in clear is hashed here and kept no further) and
// maximums.
func serverKeys(keys []config.Key) []server.Key {
	out := make([]server.Key, len(keys))
	for i, k := range keys {
		out[i] = server.Key{
			Name: k.Name, SHA256: k.SHA256(), Admin: k.Admin,
			Max: server.Maximums{
				Sandboxes:    k.MaxSandboxes,
				ResultMemory: int64(k.MaxResultMemory),
				Limits: execbox.Limits{
					Memory:  int64(k.MaxMemory),
					PIDs:    k.MaxPIDs,
					CPUs:    k.MaxCPUs,
					CPUTime: k.MaxCPUTime,
				},
			},
		}
	}
	return out
}
