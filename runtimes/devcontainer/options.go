package devcontainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/execbox/execbox"
	cfgtypes "github.com/execbox/execbox/internal/config"
)

// Name is the registered name of this runtime.
const Name = "devcontainer"

// Defaults of Options.
const (
	// DefaultNetwork gives a container the runtime starts no network but
	// loopback, as the docker runtime's; a devcontainer whose build or
	// lifecycle commands install packages needs "bridge".
	DefaultNetwork = "none"
	// DefaultLifecycleTimeout bounds each lifecycle command
	// (postCreateCommand, ...): they install dependencies.
	DefaultLifecycleTimeout = 10 * time.Minute
)

// Options configure the devcontainer runtime; the zero value gives the
// defaults. In execbox.yaml they are the runtimes.devcontainer section.
type Options struct {
	// Config is a devcontainer.json used for every sandbox, in place of
	// the workspace's own (the reference CLI's --config); with it, a
	// sandbox may also have a temporary workspace (a new host directory
	// Close removes). Default: the workspace's
	// .devcontainer/devcontainer.json, .devcontainer.json, or its one
	// .devcontainer/NAME/devcontainer.json.
	Config string `json:"config,omitempty"`
	// Keep leaves running, at Close, a container the runtime started, for
	// the next sandbox of the folder to find (as the reference tools'
	// devcontainer up does). Default false: Close removes it.
	Keep bool `json:"keep,omitempty"`
	// AllowedEnv are the host environment variables devcontainer.json may
	// read (${localEnv:NAME}); any other is refused, since commands can
	// write the file and would read the host's secrets through it.
	AllowedEnv []string `json:"allowed_env,omitempty"`
	// AllowedMounts are host directories under which devcontainer.json
	// may bind-mount a source (mounts, workspaceMount) besides the
	// workspace folder itself; any other is refused, for the same
	// reason.
	AllowedMounts []string `json:"allowed_mounts,omitempty"`
	// AllowedVolumes are names of Docker volumes devcontainer.json may
	// mount (mounts, workspaceMount, type volume) besides those this
	// runtime made for the folder, labelled with it, when the file first
	// named them; any other existing volume is refused, since commands
	// can write the file and would reach another project's or service's
	// data through it.
	AllowedVolumes []string `json:"allowed_volumes,omitempty"`
	// LifecycleTimeout bounds each lifecycle command. Default
	// DefaultLifecycleTimeout.
	LifecycleTimeout Duration `json:"lifecycle_timeout,omitempty"`

	// Of the docker runtime (runtimes.docker.*), for the containers this
	// runtime starts and the images it builds: Host the engine's address,
	// Network (default DefaultNetwork; the build's RUN steps too), Memory,
	// PIDs and CPUs the container's caps (the docker runtime's defaults),
	// Pull when to pull "image", AgentBinary the static agent program.
	Host        string        `json:"host,omitempty"`
	Network     string        `json:"network,omitempty"`
	Memory      cfgtypes.Size `json:"memory,omitempty"`
	PIDs        int64         `json:"pids,omitempty"`
	CPUs        float64       `json:"cpus,omitempty"`
	Pull        string        `json:"pull,omitempty"`
	AgentBinary string        `json:"agent_binary,omitempty"`

	// WorkspaceSize is the CLI's --workspace-size, which every runtime
	// is given: refused unless zero, since the workspace is a host
	// folder this runtime cannot bound.
	WorkspaceSize cfgtypes.Size `json:"workspace_size,omitempty"`

	Logger *slog.Logger `json:"-"`
}

// withDefaults fills in the defaults and checks every field, naming it.
func (o Options) withDefaults() (Options, error) {
	if o.Network == "" {
		o.Network = DefaultNetwork
	}
	if o.LifecycleTimeout == 0 {
		o.LifecycleTimeout = Duration(DefaultLifecycleTimeout)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if o.Config != "" {
		abs, err := filepath.Abs(o.Config)
		if err != nil {
			errs = append(errs, execbox.Invalid("runtimes.devcontainer.config", "%v", err))
		}
		o.Config = abs
	}
	if o.WorkspaceSize != 0 {
		errs = append(errs, execbox.Unsupported(Name, "runtimes.devcontainer.workspace_size"))
	}
	if o.LifecycleTimeout < 0 {
		errs = append(errs, execbox.Invalid("runtimes.devcontainer.lifecycle_timeout", "must not be negative"))
	}
	for i, d := range o.AllowedMounts {
		if !filepath.IsAbs(d) {
			errs = append(errs, execbox.Invalid("runtimes.devcontainer.allowed_mounts", "%q is not an absolute path", d))
			continue
		}
		o.AllowedMounts[i] = filepath.Clean(d)
	}
	o.AllowedMounts = slices.Clone(o.AllowedMounts)
	for _, n := range o.AllowedVolumes {
		if n == "" || strings.ContainsAny(n, "/\x00") {
			errs = append(errs, execbox.Invalid("runtimes.devcontainer.allowed_volumes", "%q is not a volume's name", n))
		}
	}
	o.AllowedVolumes = slices.Clone(o.AllowedVolumes)
	for _, n := range o.AllowedEnv {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			errs = append(errs, execbox.Invalid("runtimes.devcontainer.allowed_env", "%q is not a variable's name", n))
		}
	}
	return o, errors.Join(errs...)
}

// Duration is a time.Duration that a configuration gives as a Go
// duration ("90s", "10m") or a number of seconds.
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("%s is not a duration (\"90s\", \"10m\") or a number of seconds", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
