//go:build !linux

package devcontainer

import (
	"context"

	"github.com/execbox/execbox"
)

// Runtime is the devcontainer runtime; off Linux it is never available
// (the docker runtime it is built on is Linux's).
type Runtime struct{}

// New returns the runtime.
func New(opts Options) (*Runtime, error) {
	_, err := opts.withDefaults()
	return &Runtime{}, err
}

func (r *Runtime) Name() string                       { return Name }
func (r *Runtime) Capabilities() execbox.Capabilities { return execbox.Capabilities{} }
func (r *Runtime) Health(context.Context) execbox.Health {
	return execbox.Health{Detail: "the devcontainer runtime runs on Linux only"}
}
func (r *Runtime) Create(context.Context, execbox.Spec) (execbox.Sandbox, error) {
	return nil, execbox.ErrUnavailable
}
