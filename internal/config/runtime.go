package config

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/execbox/execbox"
)

// Values of Config.Runtime and Config.Isolation.
const (
	// RuntimeAuto picks the sandbox runtime where it works, else local.
	RuntimeAuto = "auto"
	// IsolationPrefer lets RuntimeAuto fall back to local.
	IsolationPrefer = "prefer"
	// IsolationRequire makes RuntimeAuto refuse to run without isolation.
	IsolationRequire = "require"
)

// The runtimes RuntimeAuto chooses between.
const (
	isolatedRuntime = "sandbox"
	fallbackRuntime = "local"
)

// fallbackNote makes the fallback note appear once per process.
var fallbackNote sync.Once

// OpenRuntime opens the configured runtime from execbox's registry. With
// Runtime "auto" it opens the sandbox runtime and keeps it if its Health
// says it is available; otherwise, with Isolation "require", it fails
// with ErrUnavailable and the sandbox's health detail, and with "prefer"
// it writes one line to stderr (once per process) and opens local.
func (c *Config) OpenRuntime(ctx context.Context, logger *slog.Logger, stderr io.Writer) (execbox.Runtime, error) {
	if c.Runtime != RuntimeAuto {
		return execbox.Open(c.Runtime, c.RuntimeOptions(c.Runtime, logger))
	}
	rt, err := execbox.Open(isolatedRuntime, c.RuntimeOptions(isolatedRuntime, logger))
	var detail string
	if err == nil {
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		h := rt.Health(hctx)
		cancel()
		if h.Available {
			return rt, nil
		}
		detail = h.Detail
	} else {
		detail = err.Error()
	}
	if c.Isolation == IsolationRequire {
		return nil, fmt.Errorf("runtime auto: isolation is required (isolation: require) and the sandbox runtime is unavailable: %s: %w", detail, execbox.ErrUnavailable)
	}
	fallbackNote.Do(func() {
		fmt.Fprintf(stderr, "execbox: the sandbox runtime is unavailable here (%s); running commands on the host with the local runtime, without isolation (set isolation: require to refuse instead)\n", detail)
	})
	return execbox.Open(fallbackRuntime, c.RuntimeOptions(fallbackRuntime, logger))
}
