package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/agent"
	"github.com/execbox/execbox/internal/boundary"
	"github.com/execbox/execbox/internal/provision"
	"github.com/execbox/execbox/internal/undo"
	"github.com/execbox/execbox/runtimes/sandbox/internal/cgroups"
	"github.com/execbox/execbox/runtimes/sandbox/internal/seccomp"
	"golang.org/x/sys/unix"
)

// Runtime is the sandbox runtime. It is safe for concurrent use.
type Runtime struct {
	opts Options
	log  *slog.Logger
	st   state
	// rootless: execbox runs as an ordinary user (see rootless_linux.go).
	rootless bool
	// explicit are the cgroup limits set in Options rather than defaulted:
	// without cgroups, rootless mode drops the defaults, never these.
	explicit cgroups.Limits

	probeOnce sync.Once
	probed    probe

	sweepMu   sync.Mutex
	lastSweep time.Time

	userns usernsCache

	// The image store (Options.Images or the default, opened on first
	// use), and whether Options.AgentBinary can run inside an image.
	storeOnce  sync.Once
	store      Images
	storeErr   error
	agentCheck func() error

	// seccomp is the filter every sandbox's init installs, compiled once
	// (seccomp.Filter.Bytes).
	seccomp func() ([]byte, error)
}

var _ execbox.Runtime = (*Runtime)(nil)

// New returns a sandbox runtime. It probes nothing: Health does, once.
func New(opts Options) *Runtime {
	rootless := os.Geteuid() != 0
	if rootless && opts.StateDir == "" {
		opts.StateDir = rootlessStateDir()
	}
	explicit := cgroups.Limits{Memory: int64(opts.Memory), PIDs: opts.PIDs, CPUs: opts.CPUs}
	opts = opts.withDefaults()
	r := &Runtime{opts: opts, log: opts.Logger.With("runtime", Name), st: newState(opts.StateDir, opts.TempDir, rootless),
		rootless: rootless, explicit: explicit}
	r.agentCheck = sync.OnceValue(r.checkAgentBinary)
	r.seccomp = sync.OnceValues(func() ([]byte, error) {
		// clone3 only where the agent starts commands with
		// CLONE_INTO_CGROUP.
		f, err := seccomp.Build(seccomp.Options{Clone3: r.probe().cg.Version == 2})
		return f.Bytes(), err
	})
	return r
}

// Name implements execbox.Runtime.
func (r *Runtime) Name() string { return Name }

// probe is what Health found on this machine, once per Runtime.
type probe struct {
	problems []string
	cg       cgroups.Host
	// noCgroups says why a rootless sandbox gets no cgroup (rlimits only).
	noCgroups string
	// sub, rootless, maps every inside id through newuidmap; nil maps one.
	sub      *subordinate
	idmap    bool   // idmapped mounts work in the temporary directory
	idmapErr string // why not
}

// sweepInterval is how often Create looks for the leftovers of dead
// execbox processes.
const sweepInterval = time.Minute

func (r *Runtime) probe() *probe {
	r.probeOnce.Do(func() {
		p := &r.probed
		if r.rootless {
			r.probeRootless(p)
			return
		}
		if !seccomp.Supported() {
			p.problems = append(p.problems, "no seccomp table for this architecture")
		}
		if err := r.st.init(); err != nil {
			p.problems = append(p.problems, fmt.Sprintf("state directory %s: %v", r.st.dir, err))
		}
		if err := probeNamespaces(r.opts.Network); err != nil {
			p.problems = append(p.problems, err.Error())
		}
		if pts, err := makeContainerCgroupsWritable(); err != nil {
			p.problems = append(p.problems, fmt.Sprintf("cgroup mounted read-only in a private cgroup namespace: %v (run the container with --cap-add SYS_ADMIN)", err))
		} else if len(pts) > 0 {
			r.log.Info("remounted the container's own cgroup read-write", "mounts", pts)
		}
		p.cg = cgroups.Probe("execbox", r.opts.CgroupParent)
		p.problems = append(p.problems, p.cg.Problems...)
		for _, need := range []struct {
			ctrl string
			set  bool
		}{{"memory", r.opts.Memory > 0}, {"pids", r.opts.PIDs > 0}, {"cpu", r.opts.CPUs > 0}} {
			if need.set && !p.cg.Has(need.ctrl) {
				p.problems = append(p.problems, fmt.Sprintf("the default %s limit cannot be enforced without the %s cgroup controller", need.ctrl, need.ctrl))
			}
		}
		if err := r.probeIdmap(); err != nil {
			p.idmapErr = err.Error()
		} else {
			p.idmap = true
		}
	})
	return &r.probed
}

// probeNamespaces starts the user namespace helper in every namespace a
// sandbox gets, with a full uid range: the real test of what the kernel,
// sysctls and any security module allow.
func probeNamespaces(network Network) error {
	flags := syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP
	if network != NetworkHost {
		flags |= syscall.CLONE_NEWNET
	}
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: DefaultUIDBase, Size: rangeSize}}
	cmd := execSelf(usernsArg0)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: uintptr(flags), UidMappings: m, GidMappings: m, GidMappingsEnableSetgroups: true,
		Credential: &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cannot create user, mount, pid, ipc, uts, cgroup and network namespaces: %v", err)
	}
	return nil
}

// probeIdmap makes an idmapped mount of a new temporary directory.
func (r *Runtime) probeIdmap() error {
	dir, err := os.MkdirTemp(r.opts.TempDir, "execbox-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	fd, err := r.userns.get(idmapKey{0, 0, DefaultUIDBase + DefaultUID, DefaultUIDBase + DefaultGID, 1})
	if err != nil {
		return err
	}
	f, err := idmappedClone(dir, fd)
	if err != nil {
		return err
	}
	return f.Close()
}

// Health implements execbox.Runtime: it says what isolation and limits a
// sandbox gets, or everything that is missing.
func (r *Runtime) Health(ctx context.Context) execbox.Health {
	p := r.probe()
	if len(p.problems) > 0 {
		return execbox.Health{Detail: "missing: " + strings.Join(p.problems, "; ")}
	}
	o := r.opts
	cpus := "no cpu limit"
	if o.CPUs > 0 {
		cpus = fmt.Sprintf("cpus %g", o.CPUs)
	}
	ws := "idmapped workspace"
	switch {
	case r.rootless:
		ws = "a given workspace is bound as it is (no idmapped mounts without root): its files are the command user's where they are yours"
	case !p.idmap:
		ws = "temporary workspaces only (no idmapped mounts: " + p.idmapErr + ")"
	}
	quota := "no quota"
	if o.WorkspaceSize > 0 {
		quota = fmt.Sprintf("%s, %d inodes", formatSize(int64(o.WorkspaceSize)), o.WorkspaceInodes)
	}
	limits := fmt.Sprintf("cgroup v%d (%s; limits enforced: %s)", p.cg.Version, p.cg.Layout, strings.Join(p.cg.Controllers, ", "))
	defaults := fmt.Sprintf("memory %s, pids %d, %s", formatSize(int64(o.Memory)), o.PIDs, cpus)
	if p.cg.Version == 0 {
		limits = "no cgroup: " + p.noCgroups + "; limits enforced: rlimits only (cpu time, file size, open files, address space); memory, pids and cpus are refused"
		defaults = "no cgroup limits"
	}
	who := fmt.Sprintf("commands run as uid %d", *o.UID)
	switch {
	case r.oneUID():
		who = fmt.Sprintf("rootless: one uid mapped, commands, agent and init are uid %d inside and your uid %d outside (no other user inside; for more, give this user a range of 65535 ids in /etc/subuid and /etc/subgid and install newuidmap)", *o.UID, os.Geteuid())
	case r.rootless:
		who = fmt.Sprintf("rootless: commands run as uid %d inside, your uid %d outside; every other inside id is one of your subordinate ids (uids from %d, gids from %d, through newuidmap)", *o.UID, os.Geteuid(), p.sub.uid.Start, p.sub.gid.Start)
	}
	detail := fmt.Sprintf("namespaces user, mount, pid, ipc, uts, cgroup, net (network %s); %s; seccomp, no capabilities, no_new_privs; "+
		"%s; defaults per sandbox: %s, /tmp %s, temporary workspace %s; %s",
		o.Network, limits, who, defaults, formatSize(int64(o.TmpSize)), quota, ws)
	return execbox.Health{Available: true, Detail: detail}
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dB", n)
}

// Capabilities implements execbox.Runtime: the cgroup limits are those
// whose controller this machine has.
func (r *Runtime) Capabilities() execbox.Capabilities {
	p := r.probe()
	return execbox.Capabilities{
		Isolation: true,
		Rlimits:   true,
		Memory:    p.cg.Has("memory"),
		PIDs:      p.cg.Has("pids"),
		CPUs:      p.cg.Has("cpu"),
		User:      !r.oneUID(),
		Images:    !r.rootless && p.idmap,
	}
}

// Create implements execbox.Runtime. See the package documentation for
// the steps.
func (r *Runtime) Create(ctx context.Context, spec execbox.Spec) (_ execbox.Sandbox, err error) {
	defer func() { err = boundary.CreateError(err) }()
	caps, err := r.checkCreate(ctx, &spec)
	if err != nil {
		return nil, err
	}
	r.maybeSweep()

	id, err := newID()
	if err != nil {
		return nil, err
	}
	log := r.log.With("sandbox", id)
	// Every step that creates something registers its undo; a failure
	// unwinds them, so nothing is half-created.
	var u undo.Stack
	defer u.OnError(&err)

	var img *sandboxImage
	if spec.Image != "" {
		if img, err = r.openImage(ctx, &spec, &u); err != nil {
			return nil, err
		}
	}
	slot, dir, rec, err := r.reserve(id, &u)
	if err != nil {
		return nil, err
	}
	base := r.opts.UIDBase + uint32(slot)*rangeSize
	user := r.commandUser(&spec)
	if img != nil && spec.User == nil {
		user = img.user
	}

	// The workspace: a given one is checked before anything starts; a
	// temporary one is made while the init starts (below).
	var ws sandboxWorkspace
	defer func() {
		if ws.mount != nil {
			ws.mount.Close()
		}
	}()
	if spec.Workspace != "" {
		if ws, err = r.makeWorkspace(id, &spec, rec, base, user, &u); err != nil {
			return nil, err
		}
	}

	limits := r.limits(&spec)
	cg, err := r.beginCgroup(id, limits, base, &u)
	if err != nil {
		return nil, err
	}

	// The init starts now, in its namespaces and cgroup, and waits for
	// its configuration: the rest of the cgroup, the workspace, the
	// agent's socket and the root directory are made while it does (a
	// few milliseconds of executing this binary and initialising its
	// runtime).
	launch, init, err := r.forkInit(cg, base, user, img, log, &u)
	if err != nil {
		return nil, err
	}
	if err := cg.Finish(); err != nil {
		return nil, err
	}
	if spec.Workspace == "" {
		if ws, err = r.makeWorkspace(id, &spec, rec, base, user, &u); err != nil {
			return nil, err
		}
	}
	sock, lnFile, err := agentSocket(dir)
	if err != nil {
		return nil, err
	}
	defer lnFile.Close()
	rootDir, root, err := r.initRoot(id, base, rec, &u)
	if err != nil {
		return nil, err
	}
	var rootMount, upper *os.File
	if img != nil {
		if rootMount, upper, err = r.imageRootMount(img.root, base, rootDir); err != nil {
			return nil, err
		}
		defer rootMount.Close()
		u.Add(func() { upper.Close() })
	}

	cfg, err := r.bootConfig(ctx, id, spec, caps, user, root, ws, limits, cg, init.cmd.Env)
	if err != nil {
		return nil, err
	}
	cfg.RootFD = rootMount != nil
	if err := init.configure(ctx, launch, cfg, lnFile, ws.mount, rootMount, cg); err != nil {
		return nil, err
	}

	c, csb, err := connectAgent(ctx, id, sock, log, &u)
	if err != nil {
		return nil, err
	}
	sb := &Sandbox{
		r: r, id: id, init: init, cg: cg, c: c, dir: dir, slot: slot,
		temp: rec.TempWorkspace, initRoot: rootDir,
		base: base, upper: upper,
	}
	sb.Sandbox = boundary.New(id, csb, sb.lost)
	if img != nil {
		sb.image = img.root
	}
	u.Release() // sb.Close undoes everything from here
	if err := provision.Apply(ctx, sb, &spec); err != nil {
		sb.Close()
		return nil, err
	}
	log.Debug("created", "workspace", ws.dir, "slot", slot)
	return sb, nil
}

// checkCreate refuses, before anything is made, a Create that cannot
// succeed: the runtime unavailable here, or a spec it cannot honour (every
// problem at once). It returns the runtime's capabilities, which the
// agent reports.
func (r *Runtime) checkCreate(ctx context.Context, spec *execbox.Spec) (execbox.Capabilities, error) {
	if h := r.Health(ctx); !h.Available {
		return execbox.Capabilities{}, fmt.Errorf("sandbox runtime: %s: %w", h.Detail, execbox.ErrUnavailable)
	}
	if err := spec.Validate(); err != nil {
		return execbox.Capabilities{}, err
	}
	caps := r.Capabilities()
	var errs []error
	if err := execbox.CheckLimits(Name, caps, spec.Limits, "limits."); err != nil {
		errs = append(errs, err)
	}
	if err := execbox.CheckServerFields(Name, spec); err != nil {
		errs = append(errs, err)
	}
	if u := spec.User; u != nil {
		if !caps.User {
			errs = append(errs, &execbox.FieldError{Field: "user", Kind: execbox.ErrUnsupported,
				Problem: "a rootless sandbox maps one uid, your own: commands run as the default user"})
		} else {
			errs = append(errs, checkUser(*u)...)
		}
	}
	if err := provision.CheckAssets(spec); err != nil {
		errs = append(errs, err)
	}
	if spec.Image != "" && !caps.Images {
		why := "idmapped mounts do not work here: " + r.probe().idmapErr
		if r.rootless {
			why = "a rootless sandbox cannot mount an image's root yet: run execbox as root"
		}
		errs = append(errs, &execbox.FieldError{Field: "image", Kind: execbox.ErrUnsupported, Problem: why})
	}
	if err := errors.Join(errs...); err != nil {
		return execbox.Capabilities{}, err
	}
	return caps, nil
}

// reserve takes the sandbox's slot (its uid range) and makes its state
// directory with its record, first of all, so that a later execbox
// process can sweep whatever of the sandbox this one leaves if it dies.
// The record names the cgroup before it is made (a sweep removes what of
// it exists), so that one write covers both.
//
// Its results are unnamed: an undo step reads a variable of its own,
// never a named result, which a return statement assigns before the
// caller unwinds (steps reading them freed slot 0, another sandbox's,
// and removed "": see internal/undo).
func (r *Runtime) reserve(id string, u *undo.Stack) (int, string, *record, error) {
	slot, err := r.st.allocSlot(id)
	if err != nil {
		return 0, "", nil, err
	}
	u.Add(func() { r.st.freeSlot(slot) })
	dir := r.st.sandboxDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return 0, "", nil, fmt.Errorf("state directory: %w", err)
	}
	u.Add(func() { os.RemoveAll(dir) })
	ownerStart, _ := procStart(os.Getpid())
	rec := &record{ID: id, Owner: os.Getpid(), OwnerStart: ownerStart, Slot: slot, Cgroup: cgroups.DirsOf(r.probed.cg, id)}
	if err := r.st.write(rec); err != nil {
		return 0, "", nil, err
	}
	return slot, dir, rec, nil
}

// commandUser is who commands run as: spec's user, or the runtime's.
func (r *Runtime) commandUser(spec *execbox.Spec) execbox.User {
	if spec.User != nil {
		return *spec.User
	}
	return execbox.User{UID: *r.opts.UID, GID: *r.opts.GID}
}

// sandboxWorkspace is the workspace as the init gets it.
type sandboxWorkspace struct {
	dir string
	// mount is root's detached, idmapped mount of dir for the init (nil:
	// the init binds the path); the caller closes it.
	mount *os.File
	// bound is how a rootless init binds or mounts it.
	bound boundWorkspace
}

// makeWorkspace makes the temporary workspace, or checks the given one,
// the root's way (workspace) or the rootless way (rootlessWorkspace). Its
// undo steps go to u. The mount is set, to be closed, even on failure.
func (r *Runtime) makeWorkspace(id string, spec *execbox.Spec, rec *record, base uint32, user execbox.User, u *undo.Stack) (ws sandboxWorkspace, err error) {
	if r.rootless {
		ws.bound, err = r.rootlessWorkspace(id, spec, rec, u)
		ws.dir = ws.bound.Dir
	} else {
		ws.dir, ws.mount, err = r.workspace(id, spec, rec, base, user, u)
	}
	return ws, err
}

// limits are the sandbox's cgroup limits: the runtime's defaults, or
// spec's. Only rootless mode gets here without a controller: its defaults
// are dropped (Health says so); a limit asked for was refused by
// checkCreate.
func (r *Runtime) limits(spec *execbox.Spec) cgroups.Limits {
	limits := cgroups.Limits{Memory: int64(r.opts.Memory), PIDs: r.opts.PIDs, CPUs: r.opts.CPUs}
	if spec.Limits.Memory > 0 {
		limits.Memory = spec.Limits.Memory
	}
	if spec.Limits.PIDs > 0 {
		limits.PIDs = spec.Limits.PIDs
	}
	if spec.Limits.CPUs > 0 {
		limits.CPUs = spec.Limits.CPUs
	}
	for ctrl, l := range map[string]*int64{"memory": &limits.Memory, "pids": &limits.PIDs} {
		if !r.probed.cg.Has(ctrl) {
			*l = 0
		}
	}
	if !r.probed.cg.Has("cpu") {
		limits.CPUs = 0
	}
	return limits
}

// beginCgroup makes what of the sandbox's cgroup the init needs to start
// in it; the caller finishes it (Finish) while the init starts. The
// agent's reserved uid owns the delegated cgroup; rootless, the user who
// runs execbox does, and the agent is that user.
func (r *Runtime) beginCgroup(id string, limits cgroups.Limits, base uint32, u *undo.Stack) (*cgroups.Sandbox, error) {
	owner := cgroups.Owner{UID: int(base) + AgentID, GID: int(base) + AgentID}
	if r.rootless {
		owner = cgroups.Owner{UID: -1, GID: -1}
	}
	cg, err := cgroups.Begin(r.probed.cg, id, limits, owner)
	if err != nil {
		return nil, err
	}
	u.Add(func() { cg.Destroy(time.Now().Add(10 * time.Second)) })
	return cg, nil
}

// forkInit starts the init in its namespaces and cgroup (launchInit): it
// returns at once, and the init, once started, waits for its
// configuration, so that the caller prepares the rest meanwhile.
func (r *Runtime) forkInit(cg *cgroups.Sandbox, base uint32, user execbox.User, img *sandboxImage, log *slog.Logger, u *undo.Stack) (initLaunch, *initProc, error) {
	launch := initLaunch{
		base: base, sub: r.probed.sub, oneUID: r.oneUID(), uid: user.UID, gid: user.GID,
		network: r.opts.Network, env: boundaryEnv(r.opts.RootFS), binary: r.opts.AgentBinary,
	}
	if img != nil {
		launch.env, launch.binary = img.env, img.agent
	}
	init, err := launchInit(launch, cg, log)
	if err != nil {
		return launch, nil, err
	}
	u.Add(func() { init.kill(10 * time.Second) })
	return launch, init, nil
}

// agentSocket creates the agent's listening socket in dir, a directory
// only root can reach, and returns its path and its descriptor, which is
// handed to the agent: no path inside the boundary leads to it. The
// caller closes the descriptor; the socket file goes with dir.
func agentSocket(dir string) (string, *os.File, error) {
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return "", nil, fmt.Errorf("agent socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return "", nil, fmt.Errorf("agent socket: %w", err)
	}
	lnFile, err := ln.File()
	ln.Close()
	if err != nil {
		return "", nil, fmt.Errorf("agent socket: %w", err)
	}
	return sock, lnFile, nil
}

// initRoot makes the empty directory the init builds its root on
// (makeInitRoot), owned by the sandbox's root, and records it for a
// sweep. It returns the outer directory, removed at Close, and the root.
func (r *Runtime) initRoot(id string, base uint32, rec *record, u *undo.Stack) (string, string, error) {
	rootOwner := int(base)
	if r.rootless {
		rootOwner = -1
	}
	rootDir, root, err := makeInitRoot(r.opts.TempDir, id, rootOwner)
	if err != nil {
		return "", "", err
	}
	u.Add(func() { os.RemoveAll(rootDir) })
	rec.InitRoot = rootDir
	if err := r.st.write(rec); err != nil {
		return "", "", err
	}
	return rootDir, root, nil
}

// bootConfig is the init's configuration, with the agent's in it: what
// the init needs to build the boundary on root and start the agent.
func (r *Runtime) bootConfig(ctx context.Context, id string, spec execbox.Spec, caps execbox.Capabilities, user execbox.User,
	root string, ws sandboxWorkspace, limits cgroups.Limits, cg *cgroups.Sandbox, env []string) (*bootConfig, error) {
	inside, home := agentCgroupPaths(cg.Dirs())
	agentSpec := spec
	agentSpec.User = &user
	if r.oneUID() {
		agentSpec.User = nil // commands run as the agent's uid, the only one
	}
	boot, err := agent.NewBoot(id, Name, Workspace, agentSpec, caps)
	if err != nil {
		return nil, err
	}
	filter, err := r.seccomp()
	if err != nil {
		return nil, err
	}
	cfg := &bootConfig{
		ID:            id,
		Seccomp:       filter,
		Root:          root,
		RootFS:        r.opts.RootFS,
		ReadOnly:      r.opts.ReadOnlyPaths,
		Workspace:     ws.dir,
		WorkspaceFD:   ws.mount != nil,
		Bound:         ws.bound,
		OneUID:        r.oneUID(),
		TmpSize:       int64(r.opts.TmpSize),
		ShmSize:       int64(r.opts.ShmSize),
		Network:       r.opts.Network,
		Hostname:      "sandbox",
		UID:           user.UID,
		GID:           user.GID,
		CgroupVersion: cg.Version(),
		CgroupDirs:    cg.Dirs(),
		Env:           env,
	}
	cfg.Agent, err = json.Marshal(agentConfig{
		Boot:          boot,
		CgroupVersion: cg.Version(),
		CgroupDirs:    inside,
		CgroupHome:    home,
		Limits:        limits,
		UID:           user.UID,
		GID:           user.GID,
		OneUID:        r.oneUID(),
		Debug:         r.log.Enabled(ctx, slog.LevelDebug),
	})
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// connectAgent makes the client of the agent, listening on sock since
// configure, and reaches it: the sandbox is then ready.
func connectAgent(ctx context.Context, id, sock string, log *slog.Logger, u *undo.Stack) (*client.Client, *client.Sandbox, error) {
	c, err := client.New("unix://"+sock, client.WithLogger(log))
	if err != nil {
		return nil, nil, err
	}
	u.Add(c.Close)
	csb, err := c.Agent(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox %s: reach the agent: %w", id, err)
	}
	return c, csb, nil
}

// basePath is the sandbox's standard PATH.
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// toolchainDirs are the standard places outside basePath where
// toolchains install their binaries (the official Go and Rust
// distributions, and the images built from them). Those present in the
// sandbox's root are appended to its PATH, so that a toolchain installed
// the usual way is found inside without --env PATH=....
var toolchainDirs = []string{
	"/usr/local/go/bin",
	"/usr/lib/go/bin",
	"/usr/local/cargo/bin",
}

// workspace makes the temporary workspace, or checks the given one, and
// returns it with its detached mount for the init (nil: the init binds
// the path). Its undo steps go to u.
func (r *Runtime) workspace(id string, spec *execbox.Spec, rec *record, base uint32, user execbox.User, u *undo.Stack) (string, *os.File, error) {
	hostUID, hostGID := base+user.UID, base+user.GID
	if spec.Workspace == "" {
		size := int64(r.opts.WorkspaceSize)
		outer, ws, err := makeTempWorkspace(r.opts.TempDir, id, hostUID, hostGID, max(size, 0), r.opts.WorkspaceInodes)
		if err != nil {
			return "", nil, err
		}
		u.Add(func() { removeTempWorkspace(outer) })
		rec.TempWorkspace = outer
		if err := r.st.write(rec); err != nil {
			return "", nil, err
		}
		// Owned on disk by the command user's host uid, so the idmapping
		// is the identity: files made by any other inside uid are refused
		// (EOVERFLOW), and none is host root's. The mount is passed as a
		// descriptor: the init cannot reach the root-only directory.
		userns := -1
		if r.probed.idmap {
			fd, err := r.userns.get(idmapKey{hostUID, hostGID, hostUID, hostGID, 1})
			if err != nil {
				return "", nil, err
			}
			userns = fd
		}
		m, err := idmappedClone(ws, userns)
		if err != nil && userns >= 0 {
			// A kernel without idmapped tmpfs: the owner is already the
			// command user's host uid, and other inside uids are host
			// uids of the sandbox's range, never root.
			m, err = idmappedClone(ws, -1)
		}
		return ws, m, err
	}
	g, err := openGiven(spec)
	if err != nil {
		return "", nil, err
	}
	defer unix.Close(g.fd)
	if !r.probed.idmap {
		return "", nil, &execbox.FieldError{Field: "workspace", Problem: "a given workspace needs idmapped mounts, which do not work here: " + r.probed.idmapErr, Kind: execbox.ErrUnsupported}
	}
	// The owner of the workspace on disk is the command user inside:
	// files the sandbox creates belong to that owner on the host.
	st, dirfd := g.st, g.fd
	fd, err := r.userns.get(idmapKey{st.Uid, st.Gid, hostUID, hostGID, 1})
	if err != nil {
		return "", nil, err
	}
	m, err := idmappedCloneAt(dirfd, "", fd)
	if err != nil {
		return "", nil, &execbox.FieldError{Field: "workspace", Problem: err.Error(), Kind: execbox.ErrUnsupported}
	}
	return g.dir, m, nil
}

// givenWorkspace is a given workspace, opened once: the check, the owner
// and the mount all use its descriptor, never the path again, so that a
// symlink a sandbox swaps into the path after the check (a workspace
// nested in another sandbox's) leads nowhere.
type givenWorkspace struct {
	dir  string // absolute, as given
	real string // where the descriptor leads
	fd   int    // O_PATH; the caller closes it
	st   unix.Stat_t
}

// openGiven opens and checks spec's workspace (checkWorkspace).
func openGiven(spec *execbox.Spec) (givenWorkspace, error) {
	var g givenWorkspace
	dir, err := filepath.Abs(spec.Workspace)
	if err != nil {
		return g, execbox.Invalid("workspace", "%v", err)
	}
	g.dir = dir
	if g.fd, err = unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return g, execbox.Invalid("workspace", "%s is not an existing directory", dir)
	}
	if g.real, err = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", g.fd)); err == nil {
		err = unix.Fstat(g.fd, &g.st)
	}
	if err != nil {
		unix.Close(g.fd)
		return g, fmt.Errorf("workspace: %w", err)
	}
	if err := checkWorkspace(dir, g.real, spec.AllowSystemWorkspace); err != nil {
		unix.Close(g.fd)
		return g, err
	}
	return g, nil
}

// boundaryEnv is the environment of the init and agent: what EnvInherit
// passes to commands. Nothing of the host's environment but LANG; PATH is
// basePath and the toolchain directories found under root ("" for the
// host's root).
func boundaryEnv(root string) []string {
	env := []string{"PATH=" + sandboxPath(root), "LANG=C.UTF-8", "container=execbox"}
	if l := os.Getenv("LANG"); l != "" {
		env[1] = "LANG=" + l
	}
	return env
}

// sandboxPath returns basePath followed by the toolchainDirs that are
// directories under root.
func sandboxPath(root string) string {
	p := basePath
	for _, d := range toolchainDirs {
		if fi, err := os.Stat(filepath.Join(root, d)); err == nil && fi.IsDir() {
			p += ":" + d
		}
	}
	return p
}

// maybeSweep removes the leftovers of dead execbox processes, at most
// once per sweepInterval.
func (r *Runtime) maybeSweep() {
	r.sweepMu.Lock()
	defer r.sweepMu.Unlock()
	if time.Since(r.lastSweep) < sweepInterval {
		return
	}
	r.lastSweep = time.Now()
	n, err := r.st.sweep()
	if n > 0 {
		r.log.Info("removed leftovers of dead execbox processes", "sandboxes", n)
	}
	if err != nil {
		r.log.Warn("removing leftovers of dead execbox processes", "err", err)
	}
}

// Sweep removes, now, what sandboxes of execbox processes that died left
// behind (Create does it at most once a minute; execbox serve at start).
// It returns how many it removed. ctx is unused: a sweep is bounded by
// the cgroup removal's own deadline.
func (r *Runtime) Sweep(ctx context.Context) (int, error) {
	if err := r.st.init(); err != nil {
		return 0, err
	}
	return r.st.sweep()
}

func newID() (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "sb-" + hex.EncodeToString(b), nil
}

// Sandbox is a sandbox of this runtime: the agent inside its boundary,
// reached over the protocol, plus the boundary's teardown.
type Sandbox struct {
	*boundary.Sandbox
	r    *Runtime
	id   string
	init *initProc
	cg   *cgroups.Sandbox
	c    *client.Client
	dir  string
	slot int
	temp string // temporary workspace on the host, removed at Close
	// initRoot holds the init's root mount point, removed at Close.
	initRoot string
	// image, upper and base, for a sandbox made from an image: the
	// image (in use until Close releases it, once the init, and its
	// mount of it, are gone), the tmpfs of its root's upper layer, and
	// the host id of the sandbox's uid 0 (CommitImage).
	image *ImageRoot
	upper *os.File
	base  uint32

	closeOnce sync.Once
	closeErr  error
}

var (
	_ execbox.Sandbox        = (*Sandbox)(nil)
	_ execbox.SessionOpener  = (*Sandbox)(nil)
	_ execbox.ImageCommitter = (*Sandbox)(nil)
)

// Workspace implements execbox.Sandbox: the workspace as commands see it.
func (s *Sandbox) Workspace() string { return Workspace }

// Close implements execbox.Sandbox: it kills the boundary's init, which
// takes every process of the sandbox with it (the kernel kills a PID
// namespace whose init dies), then removes the cgroup, the state
// directory and a temporary workspace. It is idempotent.
func (s *Sandbox) Close() error {
	s.closeOnce.Do(func() {
		s.Sandbox.MarkClosed()
		var errs []error
		_ = s.Sandbox.Sandbox.Close() // the agent's: it kills what it started
		if err := s.init.kill(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
		if s.image != nil {
			s.image.Release()
			s.upper.Close()
		}
		s.c.Close()
		// With every process dead, the cgroup, the temporary workspace
		// and the init's root directory are independent of each other:
		// removed at once. The state directory, whose record lets a
		// later sweep finish the job if this process dies meanwhile, and
		// the uid range go last.
		var wg sync.WaitGroup
		var cgErr, wsErr, rootErr error
		wg.Go(func() { cgErr = s.cg.Destroy(time.Now().Add(10 * time.Second)) })
		if s.temp != "" {
			wg.Go(func() { wsErr = removeTempWorkspace(s.temp) })
		}
		rootErr = os.RemoveAll(s.initRoot)
		wg.Wait()
		errs = append(errs, cgErr, wsErr, rootErr)
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, err)
		}
		s.r.st.freeSlot(s.slot)
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// checkUser refuses a user that does not exist inside a sandbox, or
// whose uid, gid or a group is the agent's (AgentID).
func checkUser(u execbox.User) []error {
	var errs []error
	if u.UID >= AgentID || u.GID >= AgentID {
		errs = append(errs, execbox.Invalid("user", "uid and gid must be below %d inside a sandbox (%d is the agent's)", AgentID, AgentID))
	}
	for i, g := range u.Groups {
		if g >= AgentID {
			errs = append(errs, execbox.Invalid(fmt.Sprintf("user.groups[%d]", i), "must be below %d (%d is the agent's)", AgentID, AgentID))
		}
	}
	return errs
}
