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

// fallbackNote makes the fallback note appear once per process.
var fallbackNote sync.Once

// OpenRuntime opens the configured runtime from execbox's registry. With
// Runtime "auto" it is execbox.OpenDefault: the sandbox runtime where its
// Health says it works and a live probe (create, exec true, close; once
// per process) succeeded, else (Isolation "prefer") local with one line on
// stderr per process, or (Isolation "require") an ErrUnavailable error
// with the sandbox's health detail.
func (c *Config) OpenRuntime(ctx context.Context, logger *slog.Logger, stderr io.Writer) (execbox.Runtime, error) {
	if c.Runtime != RuntimeAuto {
		return execbox.Open(c.Runtime, c.RuntimeOptions(c.Runtime, logger))
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rt, err := execbox.OpenDefault(hctx, execbox.DefaultOptions{
		Options:          func(name string) execbox.Options { return c.RuntimeOptions(name, logger) },
		RequireIsolation: c.Isolation == IsolationRequire,
		OnFallback: func(detail string) {
			fallbackNote.Do(func() {
				fmt.Fprintf(stderr, "execbox: the sandbox runtime is unavailable here (%s); running commands on the host with the local runtime, without isolation (set isolation: require to refuse instead)\n", detail)
			})
		},
	})
	if err != nil {
		return nil, fmt.Errorf("runtime auto: %w", err)
	}
	return rt, nil
}

// OpenServerRuntime opens the runtime of execbox serve. Unlike
// OpenRuntime it never falls back to local, since the server's clients
// cannot see a fallback and would be handed host processes: "auto" is
// the sandbox runtime or an ErrUnavailable error saying why it cannot
// run here (its Health, or the live probe), and so is an explicit
// "sandbox" whose Health says it cannot run. Only an explicit "local"
// serves commands as host processes.
func (c *Config) OpenServerRuntime(ctx context.Context, logger *slog.Logger) (execbox.Runtime, error) {
	const hint = "execbox serve never falls back to the local runtime; set runtime: local to serve commands as host processes, without isolation"
	if c.Runtime != RuntimeAuto {
		rt, err := execbox.Open(c.Runtime, c.RuntimeOptions(c.Runtime, logger))
		if err != nil || c.Runtime != execbox.IsolatedRuntime {
			return rt, err
		}
		if h := rt.Health(ctx); !h.Available {
			return nil, fmt.Errorf("runtime %s is unavailable here: %s (%s): %w", c.Runtime, h.Detail, hint, execbox.ErrUnavailable)
		}
		return rt, nil
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rt, err := execbox.OpenDefault(hctx, execbox.DefaultOptions{
		Options:          func(name string) execbox.Options { return c.RuntimeOptions(name, logger) },
		RequireIsolation: true,
	})
	if err != nil {
		return nil, fmt.Errorf("runtime auto: %w (%s)", err, hint)
	}
	return rt, nil
}
