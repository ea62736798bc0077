// Package remote is the runtime that creates sandboxes on an execbox
// server (execbox serve) over the protocol of package api: the client of
// package client, pointed at a server. Every guarantee holds as it does on
// the server's own runtime, whose capabilities it reports.
//
// A Spec is applied from the client's side: the sandbox is created on the
// server from the spec's defaults (environment, limits, user, labels,
// workspace), then its snapshot, assets and setup commands are applied
// through the protocol, so an asset's Source is a path on the machine
// running this runtime, streamed to the server as tar. Workspace, if set,
// is a directory on the server's machine (which must allow host paths).
package remote

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/provision"
)

// Name is the registered name of this runtime.
const Name = "remote"

// DefaultTokenEnv is the variable the token is read from when the
// options name none: the one execbox serve reads and prints.
const DefaultTokenEnv = "EXECBOX_TOKEN"

func init() {
	execbox.Register(Name, func(opts execbox.Options) (execbox.Runtime, error) {
		var o Options
		// Every problem at once: what decoded is checked too.
		derr := execbox.DecodeSettings(Name, opts.Settings, &o)
		o.Logger = opts.Logger
		rt, err := New(o)
		if err := errors.Join(derr, err); err != nil {
			return nil, err
		}
		return rt, nil
	})
}

// Options configure the remote runtime.
type Options struct {
	// URL is the server's base URL: "http://host:port" or
	// "unix:///path/to.sock". Required. YAML runtimes.remote.url.
	URL string `json:"url"`
	// Token is the server's bearer token. YAML runtimes.remote.token;
	// prefer TokenEnv, which keeps it out of the file.
	Token string `json:"token,omitempty"`
	// TokenEnv names an environment variable holding the token, read
	// when the runtime is made. YAML runtimes.remote.token_env. With
	// neither Token nor TokenEnv, the token is $EXECBOX_TOKEN if set
	// (what execbox serve prints when it generates one).
	TokenEnv string `json:"token_env,omitempty"`
	// Runtime is the server's runtime to create sandboxes with; empty
	// means the server's default. YAML runtimes.remote.runtime.
	Runtime string `json:"runtime,omitempty"`

	// Logger; nil discards.
	Logger *slog.Logger `json:"-"`
	// ClientOptions are passed to client.New after the URL, token and
	// logger (a transport, a unix socket).
	ClientOptions []client.Option `json:"-"`
}

// Runtime is the remote runtime.
type Runtime struct {
	opts Options
	c    *client.Client
	log  *slog.Logger

	mu   sync.Mutex
	caps *execbox.Capabilities // from the server, once known
}

var _ execbox.Runtime = (*Runtime)(nil)

// New returns a remote runtime. It does not contact the server.
func New(opts Options) (*Runtime, error) {
	if opts.URL == "" {
		return nil, execbox.Invalid("runtimes."+Name+".url", "is required (the execbox server's URL)")
	}
	token := opts.Token
	if token == "" && opts.TokenEnv == "" {
		token = os.Getenv(DefaultTokenEnv)
	}
	if opts.TokenEnv != "" {
		token = os.Getenv(opts.TokenEnv)
		if token == "" {
			return nil, execbox.Invalid("runtimes."+Name+".token_env", "$%s is empty or unset", opts.TokenEnv)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("runtime", Name)
	copts := append([]client.Option{client.WithToken(token), client.WithLogger(log)}, opts.ClientOptions...)
	c, err := client.New(opts.URL, copts...)
	if err != nil {
		return nil, fmt.Errorf("runtimes.%s.url: %w", Name, err)
	}
	return &Runtime{opts: opts, c: c, log: log}, nil
}

// Client returns the runtime's client of the server.
func (r *Runtime) Client() *client.Client { return r.c }

// Name implements execbox.Runtime.
func (r *Runtime) Name() string { return Name }

// runtimeInfo asks the server about the runtime sandboxes are made with.
func (r *Runtime) runtimeInfo(ctx context.Context) (api.RuntimeInfo, error) {
	rts, err := r.c.Runtimes(ctx)
	if err != nil {
		return api.RuntimeInfo{}, err
	}
	for _, rt := range rts {
		if rt.Name == r.opts.Runtime || (r.opts.Runtime == "" && rt.Default) {
			caps := rt.Capabilities.Capabilities()
			r.mu.Lock()
			r.caps = &caps
			r.mu.Unlock()
			return rt, nil
		}
	}
	return api.RuntimeInfo{}, &execbox.FieldError{
		Field: "runtimes." + Name + ".runtime", Kind: execbox.ErrNotFound,
		Problem: fmt.Sprintf("the server at %s has no runtime %q", r.opts.URL, cmp.Or(r.opts.Runtime, "(default)")),
	}
}

// Health implements execbox.Runtime: the server is reachable and its
// runtime is available.
func (r *Runtime) Health(ctx context.Context) execbox.Health {
	info, err := r.runtimeInfo(ctx)
	if err != nil {
		return execbox.Health{Detail: fmt.Sprintf("server %s: %v", r.opts.URL, err)}
	}
	detail := fmt.Sprintf("server %s, runtime %s", r.opts.URL, info.Name)
	if info.Detail != "" {
		detail += ": " + info.Detail
	}
	return execbox.Health{Available: info.Available, Detail: detail}
}

// capsTimeout bounds the request Capabilities makes when it has not
// learnt them yet.
const capsTimeout = 10 * time.Second

// Capabilities implements execbox.Runtime: those of the server's runtime,
// learnt by Health or Create (or asked for now). If the server cannot be
// reached it claims none; limits are checked by the server anyway.
func (r *Runtime) Capabilities() execbox.Capabilities {
	r.mu.Lock()
	caps := r.caps
	r.mu.Unlock()
	if caps != nil {
		return *caps
	}
	ctx, cancel := context.WithTimeout(context.Background(), capsTimeout)
	defer cancel()
	info, err := r.runtimeInfo(ctx)
	if err != nil {
		r.log.Warn("capabilities unknown", "error", err)
		return execbox.Capabilities{}
	}
	return info.Capabilities.Capabilities()
}

// Create implements execbox.Runtime. The spec is checked here first, so
// nothing is created for a bad one; the sandbox is then created on the
// server and provisioned through the protocol; on any failure it is
// deleted again.
func (r *Runtime) Create(ctx context.Context, spec execbox.Spec) (_ execbox.Sandbox, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := provision.CheckAssets(&spec); err != nil {
		return nil, err
	}
	base := spec
	base.Snapshot, base.Assets, base.Setup = nil, nil, nil
	sb, err := r.c.Create(ctx, base, client.CreateOptions{Runtime: r.opts.Runtime})
	if err != nil {
		if errors.Is(err, execbox.ErrUnavailable) && api.ErrorCode(err) == "" {
			return nil, fmt.Errorf("runtime %s: %w", Name, err)
		}
		return nil, err
	}
	defer func() {
		if err != nil {
			if cerr := sb.Close(); cerr != nil {
				r.log.Warn("deleting a sandbox that failed provisioning", "sandbox", sb.ID(), "error", cerr)
			}
		}
	}()
	if err := provision.Apply(ctx, sb, &spec); err != nil {
		return nil, err
	}
	r.log.Debug("created", "sandbox", sb.ID(), "workspace", sb.Workspace())
	return sb, nil
}
