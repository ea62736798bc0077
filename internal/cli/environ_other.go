//go:build !linux

package cli

// scrubEnviron does nothing where no /proc/PID/environ shows the initial
// environment.
func scrubEnviron(name string) error { return nil }
