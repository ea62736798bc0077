package docker

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/config"
)

// Name is the registered name of this runtime.
const Name = "docker"

// Defaults of Options.
const (
	// DefaultMemory and DefaultPIDs cap each container, as the sandbox
	// runtime caps each sandbox.
	DefaultMemory = 2 << 30
	DefaultPIDs   = 1024
	// DefaultWorkspaceSize and DefaultWorkspaceInodes bound a temporary
	// workspace, as on the sandbox runtime.
	DefaultWorkspaceSize   = 1 << 30
	DefaultWorkspaceInodes = 1 << 18
	// DefaultNetwork gives a container no network but loopback.
	DefaultNetwork = "none"
	// Workspace is where the workspace is mounted in every container.
	Workspace = "/workspace"
)

// Pull policies (Options.Pull).
const (
	PullMissing = "missing" // pull an image the engine does not have (default)
	PullNever   = "never"   // use only what the engine has
	PullAlways  = "always"  // pull at every Create
)

// Options configure the docker runtime; the zero value gives the defaults
// above. In execbox.yaml they are the runtimes.docker section.
type Options struct {
	// Host is the engine's address ("unix:///var/run/docker.sock",
	// "tcp://host:2376"). Default: $DOCKER_HOST, else the local socket.
	Host string `json:"host,omitempty"`
	// Image is the image of a sandbox whose Spec sets none. There is no
	// built-in default: a container needs one.
	Image string `json:"image,omitempty"`
	// Pull is when Create asks the engine to pull the image: "missing"
	// (default), "never" or "always".
	Pull string `json:"pull,omitempty"`
	// Network is the container's network: "none" (default: loopback
	// only), "bridge", "host" or a network's name.
	Network string `json:"network,omitempty"`
	// Memory, PIDs and CPUs cap each container as a whole (its memory
	// cgroup with the page cache, processes and threads, CPU cores).
	// Defaults DefaultMemory and DefaultPIDs, no CPU cap. Negative: no
	// cap.
	Memory config.Size `json:"memory,omitempty"`
	PIDs   int64       `json:"pids,omitempty"`
	CPUs   float64     `json:"cpus,omitempty"`
	// AgentBinary is a statically linked program that is execbox's agent
	// in the container: a build of execbox (make build) or of
	// cmd/execbox-agent. It is bind-mounted read-only; nothing of it is
	// copied into the image. Default: this program if it is static, else
	// a static build of execbox made once with the go command and cached
	// ($XDG_CACHE_HOME/execbox/agent, /var/cache/execbox/agent for root).
	AgentBinary string `json:"agent_binary,omitempty"`
	// StateDir holds one directory per live container: the agent's
	// configuration and socket, bind-mounted into it. Default
	// /run/execbox/docker.
	StateDir string `json:"state_dir,omitempty"`
	// WorkspaceSize and WorkspaceInodes bound a temporary workspace, a
	// tmpfs in the container (its pages count in Memory). Defaults
	// DefaultWorkspaceSize and DefaultWorkspaceInodes.
	WorkspaceSize   config.Size `json:"workspace_size,omitempty"`
	WorkspaceInodes int64       `json:"workspace_inodes,omitempty"`

	Logger *slog.Logger `json:"-"`
}

// DefaultStateDir is Options.StateDir's default.
const DefaultStateDir = "/run/execbox/docker"

// withDefaults fills in the defaults and checks every field, naming it.
func (o Options) withDefaults() (Options, error) {
	if o.Pull == "" {
		o.Pull = PullMissing
	}
	if o.Network == "" {
		o.Network = DefaultNetwork
	}
	if o.Memory == 0 {
		o.Memory = DefaultMemory
	}
	if o.PIDs == 0 {
		o.PIDs = DefaultPIDs
	}
	if o.WorkspaceSize == 0 {
		o.WorkspaceSize = DefaultWorkspaceSize
	}
	if o.WorkspaceInodes == 0 {
		o.WorkspaceInodes = DefaultWorkspaceInodes
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	switch o.Pull {
	case PullMissing, PullNever, PullAlways:
	default:
		errs = append(errs, execbox.Invalid("runtimes.docker.pull", "%q: want missing, never or always", o.Pull))
	}
	if o.WorkspaceSize < 0 || o.WorkspaceInodes < 0 {
		errs = append(errs, execbox.Invalid("runtimes.docker.workspace_size", "and workspace_inodes must be positive"))
	}
	if o.CPUs < 0 {
		errs = append(errs, execbox.Invalid("runtimes.docker.cpus", "%v is negative", o.CPUs))
	}
	if o.Memory > 0 && o.Memory < 8<<20 {
		errs = append(errs, execbox.Invalid("runtimes.docker.memory", "%d bytes is below the 8 MiB the agent needs", o.Memory))
	}
	if o.PIDs > 0 && o.PIDs < 16 {
		errs = append(errs, execbox.Invalid("runtimes.docker.pids", "%d is below the 16 the agent needs", o.PIDs))
	}
	return o, errors.Join(errs...)
}

// CapHint says, in the ErrUnsupported problems of a spec's memory, pids
// and cpus limits in err, where the containers of runtime (docker or
// devcontainer) get those caps instead: runtimes.NAME.memory and so on,
// for each container as a whole, since the agent has no cgroup of its
// own to place one sandbox's or command's processes in.
func CapHint(runtime string, err error) error {
	if err == nil {
		return nil
	}
	return execbox.MapFieldErrors(err, func(fe execbox.FieldError) execbox.FieldError {
		switch fe.Field {
		case "limits.memory", "limits.pids", "limits.cpus":
			if errors.Is(fe.Kind, execbox.ErrUnsupported) {
				fe.Problem += fmt.Sprintf(" per sandbox or command: set each container's cap with runtimes.%s.%s", runtime, strings.TrimPrefix(fe.Field, "limits."))
			}
		}
		return fe
	})
}
