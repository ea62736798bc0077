//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"runtime"

	"github.com/execbox/execbox"
)

// Runtime is the sandbox runtime; it works on Linux only. Elsewhere it
// stays registered, unavailable, so that configurations naming it fail
// with a clear reason.
type Runtime struct{ opts Options }

var _ execbox.Runtime = (*Runtime)(nil)

// New returns the sandbox runtime.
func New(opts Options) *Runtime { return &Runtime{opts: opts.withDefaults()} }

// Name implements execbox.Runtime.
func (r *Runtime) Name() string { return Name }

// Health implements execbox.Runtime: unavailable.
func (r *Runtime) Health(ctx context.Context) execbox.Health {
	return execbox.Health{Detail: fmt.Sprintf("the sandbox runtime needs Linux namespaces and cgroups (this is %s)", runtime.GOOS)}
}

// Capabilities implements execbox.Runtime: nothing is enforced.
func (r *Runtime) Capabilities() execbox.Capabilities { return execbox.Capabilities{} }

// Create implements execbox.Runtime: always ErrUnavailable.
func (r *Runtime) Create(ctx context.Context, spec execbox.Spec) (execbox.Sandbox, error) {
	return nil, fmt.Errorf("sandbox runtime: %s: %w", r.Health(ctx).Detail, execbox.ErrUnavailable)
}
