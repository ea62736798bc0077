package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox"
	execclient "github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/agent"
	"github.com/execbox/execbox/internal/boundary"
	"github.com/execbox/execbox/internal/hostpath"
	"github.com/execbox/execbox/internal/owner"
	"github.com/execbox/execbox/internal/provision"
	"github.com/execbox/execbox/internal/staticbin"
	"github.com/execbox/execbox/internal/undo"
)

// Runtime is the docker runtime. It is safe for concurrent use.
type Runtime struct {
	opts  Options
	log   *slog.Logger
	owner string // this process, as the containers' owner label says it

	engine          func() (*client.Client, error)
	configuredAgent func() (string, error) // Options.AgentBinary, checked once
	sweepOnce       sync.Once

	usersMu sync.Mutex
	users   map[string]execbox.User // image ID and user name → ids
}

var _ execbox.Runtime = (*Runtime)(nil)

// New returns a docker runtime. It does not reach the engine: Health and
// Create do.
func New(opts Options) (*Runtime, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Runtime{opts: o, log: o.Logger, owner: owner.Self(), users: map[string]execbox.User{}}
	r.engine = sync.OnceValues(func() (*client.Client, error) {
		copts := []client.Opt{client.FromEnv}
		if o.Host != "" {
			copts = append(copts, client.WithHost(o.Host))
		}
		return client.New(copts...)
	})
	r.configuredAgent = sync.OnceValues(r.checkAgent)
	return r, nil
}

// Name implements execbox.Runtime.
func (r *Runtime) Name() string { return Name }

// Capabilities implements execbox.Runtime. Memory, PIDs and CPUs caps
// are the container's as a whole (Options), not per command: the agent
// has no cgroup of its own to place a command in.
func (r *Runtime) Capabilities() execbox.Capabilities {
	return execbox.Capabilities{Isolation: true, Rlimits: true, User: true, Images: true}
}

// Health implements execbox.Runtime: the engine reachable, its version,
// the agent program, and the defaults.
func (r *Runtime) Health(ctx context.Context) execbox.Health {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	dc, err := r.engine()
	if err != nil {
		return execbox.Health{Detail: fmt.Sprintf("docker client: %v", err)}
	}
	v, err := dc.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return execbox.Health{Detail: fmt.Sprintf("docker engine at %s unreachable: %v", dc.DaemonHost(), err)}
	}
	agent, err := r.agentHealth()
	if err != nil {
		return execbox.Health{Detail: err.Error()}
	}
	image := r.opts.Image
	if image == "" {
		image = "none (Spec.Image required)"
	}
	return execbox.Health{Available: true, Detail: fmt.Sprintf("docker engine %s (API %s) at %s; image %s, network %s, memory %s, pids %d; agent %s",
		v.Version, dc.ClientVersion(), dc.DaemonHost(), image, r.opts.Network, r.opts.Memory, r.opts.PIDs, agent)}
}

// agentHealth says which agent program Create would use, without
// building one (staticbin.Lookup).
func (r *Runtime) agentHealth() (string, error) {
	if r.opts.AgentBinary != "" {
		return r.configuredAgent()
	}
	bin, err := staticbin.Lookup()
	if err != nil {
		return "", &execbox.FieldError{Field: "runtimes.docker.agent_binary", Kind: execbox.ErrUnavailable, Problem: err.Error()}
	}
	if bin == "" {
		return "a static build of execbox, made on first use", nil
	}
	return bin, nil
}

// agentBin is the agent program: Options.AgentBinary (checked once),
// else this program when it is static, else a static build of execbox
// made once and cached (staticbin.Agent): the image has its own C
// library, or none.
func (r *Runtime) agentBin(ctx context.Context) (string, error) {
	if r.opts.AgentBinary != "" {
		return r.configuredAgent()
	}
	bin, err := staticbin.Agent(ctx, r.log)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", &execbox.FieldError{Field: "runtimes.docker.agent_binary", Kind: execbox.ErrUnavailable, Problem: err.Error()}
	}
	return bin, nil
}

// checkAgent checks Options.AgentBinary: a static program.
func (r *Runtime) checkAgent() (string, error) {
	const field = "runtimes.docker.agent_binary"
	bin, err := filepath.EvalSymlinks(r.opts.AgentBinary)
	if err != nil {
		return "", execbox.Invalid(field, "%v", err)
	}
	interp, err := staticbin.Interpreter(bin)
	if err != nil {
		return "", execbox.Invalid(field, "%s: %v", bin, err)
	}
	if interp != "" {
		return "", &execbox.FieldError{Field: field, Kind: execbox.ErrUnavailable,
			Problem: fmt.Sprintf("the agent program %s is dynamically linked (interpreter %s) and would not run in an image: use a static build of execbox (make build, or CGO_ENABLED=0 go build ./cmd/execbox) or of cmd/execbox-agent, or leave agent_binary unset", bin, interp)}
	}
	return bin, nil
}

// Create implements execbox.Runtime.
func (r *Runtime) Create(ctx context.Context, spec execbox.Spec) (execbox.Sandbox, error) {
	sb, err := r.CreateContainer(ctx, spec, Container{})
	if err != nil {
		return nil, err
	}
	return sb, nil
}

// Container is what a runtime built on this one (devcontainer) sets of a
// sandbox's container beyond its Spec. The zero value is Create's.
type Container struct {
	// Workspace is where the workspace is mounted and commands start.
	// Default Workspace.
	Workspace string
	// Mounts are more mounts, after the workspace's.
	Mounts []mount.Mount
	// Env is the container's environment (devcontainer.json's
	// containerEnv): the agent's, and so under the image's and the
	// spec's in every command's.
	Env []string
	// Labels are more labels of the container.
	Labels map[string]string
	// Name is the container's name. Default "execbox-" and the sandbox's
	// ID.
	Name string
}

// CreateContainer is Create with more of the container set by c.
func (r *Runtime) CreateContainer(ctx context.Context, spec execbox.Spec, c Container) (_ *Sandbox, err error) {
	defer func() { err = boundary.CreateError(err) }()
	if c.Workspace == "" {
		c.Workspace = Workspace
	}
	if !path.IsAbs(c.Workspace) || path.Clean(c.Workspace) != c.Workspace || c.Workspace == "/" {
		return nil, execbox.Invalid("container.workspace", "%q must be a clean absolute path other than /", c.Workspace)
	}
	if err := r.checkSpec(&spec); err != nil {
		return nil, err
	}
	dc, err := r.engine()
	if err != nil {
		return nil, fmt.Errorf("docker client: %v: %w", err, execbox.ErrUnavailable)
	}
	agentBin, err := r.agentBin(ctx)
	if err != nil {
		return nil, err
	}
	r.sweepOnce.Do(func() { r.sweep(ctx, dc) })

	id, err := newID()
	if err != nil {
		return nil, err
	}
	log := r.log.With("sandbox", id)
	var u undo.Stack
	defer u.OnError(&err)

	img, err := r.ensureImage(ctx, dc, spec.Image)
	if err != nil {
		return nil, err
	}
	user := spec.User
	if user == nil {
		if user, err = r.imageUser(ctx, dc, img); err != nil {
			return nil, err
		}
	}
	ws, err := r.workspace(&spec, *user)
	if err != nil {
		return nil, err
	}
	if ws.pin != nil {
		defer ws.pin.Close()
	}
	state, err := r.makeStateDir(id, &u)
	if err != nil {
		return nil, err
	}
	if err := writeBoot(state, id, c.Workspace, spec, img, c.Env, user, r.Capabilities()); err != nil {
		return nil, err
	}
	cid, err := r.createContainer(ctx, dc, id, spec, c, img, agentBin, state, ws, &u)
	if err != nil {
		return nil, err
	}
	cl, csb, pin, err := r.start(ctx, dc, id, cid, c.Workspace, ws, log)
	if err != nil {
		return nil, err
	}
	sb := &Sandbox{r: r, dc: dc, id: id, cid: cid, workspace: c.Workspace, state: state, c: cl, pin: pin}
	sb.Sandbox = boundary.New(id, csb, sb.lost)
	u.Release() // sb.Close undoes everything from here
	if err := provision.Apply(ctx, sb, &spec); err != nil {
		sb.Close()
		return nil, err
	}
	log.Debug("created", "container", cid, "image", img.ref)
	return sb, nil
}

// checkSpec refuses, before anything is made, a spec this runtime cannot
// honour, naming every problem; it fills in the default image.
func (r *Runtime) checkSpec(spec *execbox.Spec) error {
	if spec.Image == "" {
		spec.Image = r.opts.Image
	}
	errs := []error{spec.Validate(), CapHint(Name, execbox.CheckLimits(Name, r.Capabilities(), spec.Limits, "limits.")), execbox.CheckServerFields(Name, spec)}
	if spec.Image == "" {
		errs = append(errs, execbox.Invalid("image", "is required by the docker runtime (or set runtimes.docker.image)"))
	} else if strings.ContainsAny(spec.Image, "/") && (strings.HasPrefix(spec.Image, "/") || strings.HasPrefix(spec.Image, ".")) {
		errs = append(errs, &execbox.FieldError{Field: "image", Kind: execbox.ErrUnsupported,
			Problem: fmt.Sprintf("%s is a path: the docker runtime takes an image the engine has or can pull (load a layout or tarball with docker load)", spec.Image)})
	}
	return errors.Join(errs...)
}

// makeStateDir makes the sandbox's host directory: the agent's
// configuration and socket, bind-mounted into the container. Only root
// reaches it (inside the container too: a command running as another
// user cannot talk to the agent).
func (r *Runtime) makeStateDir(id string, u *undo.Stack) (string, error) {
	if err := os.MkdirAll(r.opts.StateDir, 0o711); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	dir := filepath.Join(r.opts.StateDir, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	u.Add(func() { os.RemoveAll(dir) })
	return dir, nil
}

// workspace is what is mounted at /workspace: a given host directory
// (checked as the sandbox runtime checks it), bind-mounted; or, for a
// temporary one, a tmpfs of Options.WorkspaceSize owned by user, which
// the container's memory cap also counts and which goes with the
// container.
type workspace struct {
	host  string   // the given directory, "" for a tmpfs
	pin   *os.File // the given directory as checked (O_PATH), until verify
	tmpfs string   // the tmpfs's mount options
}

func (r *Runtime) workspace(spec *execbox.Spec, user execbox.User) (workspace, error) {
	if spec.Workspace == "" {
		return workspace{tmpfs: fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,nr_inodes=%d,mode=0755,uid=%d,gid=%d",
			int64(r.opts.WorkspaceSize), r.opts.WorkspaceInodes, user.UID, user.GID)}, nil
	}
	dir, err := filepath.Abs(spec.Workspace)
	if err != nil {
		return workspace{}, execbox.Invalid("workspace", "%v", err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return workspace{}, execbox.Invalid("workspace", "%s is not an existing directory", dir)
	}
	pin := os.NewFile(uintptr(fd), dir)
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err == nil {
		err = hostpath.CheckWorkspace(dir, real, spec.AllowSystemWorkspace)
	}
	if err != nil {
		pin.Close()
		return workspace{}, err
	}
	return workspace{host: real, pin: pin}, nil
}

// verify checks that what the engine mounted at dir in the container
// is the directory that was checked: a path is resolved again by the
// engine, and anything that could write to one of its parents meanwhile
// (another sandbox's command, in a workspace above it) could have made
// it lead elsewhere, to /etc. It closes the pin.
func (ws workspace) verify(ct *target, dir string) error {
	if ws.pin == nil {
		return nil
	}
	defer ws.pin.Close()
	if !ct.isFile(dir, ws.pin) {
		return &execbox.FieldError{Field: "workspace", Kind: execbox.ErrPermission,
			Problem: fmt.Sprintf("%s changed while the container started (a parent directory was replaced): refused", ws.host)}
	}
	return nil
}

// writeBoot writes the agent's configuration (bootJSON) in state.
func writeBoot(state, id, workspace string, spec execbox.Spec, img imageInfo, containerEnv []string, user *execbox.User, caps execbox.Capabilities) error {
	b, err := bootJSON(id, workspace, spec, img, containerEnv, user, caps)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(state, bootFile), b, 0o600)
}

// bootJSON is the agent's configuration: the spec's defaults with the
// image's and the container's environment under them, and the user
// commands run as.
func bootJSON(id, workspace string, spec execbox.Spec, img imageInfo, containerEnv []string, user *execbox.User, caps execbox.Capabilities) ([]byte, error) {
	env := make(map[string]string, len(img.env)+len(containerEnv)+len(spec.Env))
	for _, kv := range slices.Concat(img.env, containerEnv) {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	spec.Env, spec.User = env, user
	boot, err := agent.NewBoot(id, Name, workspace, spec, caps)
	if err != nil {
		return nil, err
	}
	return json.Marshal(boot)
}

// start starts the container and connects to its agent once it listens.
func (r *Runtime) start(ctx context.Context, dc *client.Client, id, cid, workspace string, ws workspace, log *slog.Logger) (*execclient.Client, *execclient.Sandbox, *os.File, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exited := dc.ContainerWait(wctx, cid, client.ContainerWaitOptions{Condition: "next-exit"})
	if _, err := dc.ContainerStart(ctx, cid, client.ContainerStartOptions{}); err != nil {
		return nil, nil, nil, fmt.Errorf("sandbox %s: start container: %w", id, engineErr(err))
	}
	started := time.Now()
	ct, err := openTarget(ctx, dc, cid)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sandbox %s: %w%s", id, err, r.logsTail(dc, cid))
	}
	defer ct.close()
	if err := ws.verify(ct, workspace); err != nil {
		return nil, nil, nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	sock := path.Join(sockDir, socketFile)
	pin, err := waitSocket(ctx, sock, func() (int, error) {
		return ct.open(sock, unix.O_PATH|unix.O_NOFOLLOW, unix.RESOLVE_NO_SYMLINKS)
	}, exited.Result, exited.Error)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sandbox %s: the agent did not start: %w%s", id, err, r.logsTail(dc, cid))
	}
	c, csb, err := connect(ctx, pin, started, log)
	if err != nil {
		pin.Close()
		return nil, nil, nil, fmt.Errorf("sandbox %s: reach the agent: %w%s", id, err, r.logsTail(dc, cid))
	}
	return c, csb, pin, nil
}

// connect connects to the agent listening on the socket pin (O_PATH),
// started at started.
func connect(ctx context.Context, pin *os.File, started time.Time, log *slog.Logger) (*execclient.Client, *execclient.Sandbox, error) {
	// Every connection goes through the descriptor: a command that
	// replaces the socket's path reaches nothing of the host's.
	c, err := execclient.New("unix://"+fmt.Sprintf("/proc/self/fd/%d", pin.Fd()), execclient.WithLogger(log))
	if err != nil {
		return nil, nil, err
	}
	// The socket's file exists from bind, a moment before listen.
	var csb *execclient.Sandbox
	for delay := 200 * time.Microsecond; ; delay = min(2*delay, 20*time.Millisecond) {
		csb, err = c.Agent(ctx)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || delay >= 20*time.Millisecond && time.Since(started) > 5*time.Second {
			break
		}
		time.Sleep(delay)
	}
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, csb, nil
}

// newID returns a new sandbox ID.
func newID() (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "sb-" + hex.EncodeToString(b), nil
}

// engineErr is EngineErr.
func engineErr(err error) error { return EngineErr(err) }

// EngineErr classifies an error of the engine's as execbox's kinds (not
// found, invalid, permission, unavailable), wrapping it.
func EngineErr(err error) error {
	switch {
	case err == nil:
		return nil
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%w: %w", err, execbox.ErrNotFound)
	case cerrdefs.IsInvalidArgument(err):
		return fmt.Errorf("%w: %w", err, execbox.ErrInvalidArgument)
	case cerrdefs.IsPermissionDenied(err), cerrdefs.IsUnauthorized(err):
		return fmt.Errorf("%w: %w", err, execbox.ErrPermission)
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("%w: %w", err, execbox.ErrUnavailable)
	}
	return err
}
