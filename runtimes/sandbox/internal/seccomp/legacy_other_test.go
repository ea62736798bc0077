//go:build linux && !amd64

package seccomp

// This architecture has only the *at forms, which the other probes make.
var (
	legacyProbes = map[string]func() error{}
	legacyWant   = map[string]string{}
)
