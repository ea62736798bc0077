package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/agent/workspace"
	"github.com/execbox/execbox/internal/server"
)

// Boot is an agent's configuration as a runtime hands it to an agent it
// starts inside a boundary (a pipe, a file, an environment variable):
// JSON, in the protocol's form. The hooks of Config are the boundary's
// own and are not part of it.
type Boot struct {
	// ID identifies the sandbox; it must be unique on the machine (it
	// marks every process for tree kills).
	ID string `json:"id"`
	// Runtime names the runtime in errors and GET /v1/info.
	Runtime string `json:"runtime,omitempty"`
	// Workspace is the workspace directory as the agent sees it. It must
	// exist; the agent never removes it.
	Workspace string `json:"workspace"`
	// Spec supplies the defaults of every command: env, env_policy,
	// env_allow, limits and user. The runtime applies the rest (assets,
	// setup) through the protocol once the agent runs.
	Spec api.Spec `json:"spec"`
	// Capabilities is what the agent may enforce; other limits are
	// refused with ErrUnsupported.
	Capabilities api.Capabilities `json:"capabilities"`
}

// NewBoot returns the Boot of a sandbox for a runtime to send. Only the
// fields of spec an agent uses travel.
func NewBoot(id, runtime, workspace string, spec execbox.Spec, caps execbox.Capabilities) (Boot, error) {
	s := execbox.Spec{Env: spec.Env, EnvPolicy: spec.EnvPolicy, EnvAllow: spec.EnvAllow, Limits: spec.Limits, User: spec.User}
	ws, err := api.NewSpec(s)
	if err != nil {
		return Boot{}, err
	}
	return Boot{ID: id, Runtime: runtime, Workspace: workspace, Spec: ws, Capabilities: api.NewCapabilities(caps)}, nil
}

// Config checks b, opens its workspace and returns the agent's Config,
// to which the caller adds its boundary's hooks. Errors name the field.
// An agent running as root whose spec names a user does every file
// operation as that user (Config.FilesAs).
func (b Boot) Config() (Config, error) {
	spec, err := b.Spec.Spec()
	if err == nil {
		err = spec.Validate()
	}
	err = errors.Join(
		condErr(b.ID == "", execbox.Invalid("id", "is required")),
		condErr(b.Workspace == "", execbox.Invalid("workspace", "is required")),
		wrap("spec", err))
	if err != nil {
		return Config{}, fmt.Errorf("agent: %w", err)
	}
	ws, err := workspace.Open(b.Workspace)
	if err != nil {
		return Config{}, fmt.Errorf("agent: open workspace: %w", err)
	}
	cfg := Config{ID: b.ID, Runtime: b.Runtime, Workspace: ws, Spec: spec, Capabilities: b.Capabilities.Capabilities()}
	if u := spec.User; u != nil && os.Geteuid() == 0 {
		// Files are the commands' user's to touch, as if a command had:
		// a link a command planted leads the agent nowhere that user
		// could not go.
		cfg.FilesAs = &Owner{UID: int(u.UID), GID: int(u.GID)}
	}
	return cfg, nil
}

// Serve serves the sandbox cfg describes over the protocol on ln (a unix
// socket, an inherited descriptor, a port) until ctx is done, then kills
// everything the sandbox started, closes its workspace and returns. It is
// what every agent process runs; client.New(...).Agent is the other side.
func Serve(ctx context.Context, ln net.Listener, cfg Config, opts server.Options) error {
	if opts.Logger == nil {
		opts.Logger = cfg.Logger
	}
	sb := New(cfg)
	var closeErr error
	err := server.Serve(ctx, ln, server.NewSandboxHandler(sb, cfg.Runtime, opts), opts.Logger, func() { closeErr = sb.Close() })
	return errors.Join(err, closeErr)
}

func condErr(cond bool, err error) error {
	if cond {
		return err
	}
	return nil
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
