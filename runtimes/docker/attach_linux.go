package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/boundary"
	"github.com/execbox/execbox/internal/imageuser"
	"github.com/execbox/execbox/internal/owner"
	"github.com/execbox/execbox/internal/provision"
	"github.com/execbox/execbox/internal/undo"
)

// Attaching to a running container (one this runtime did not make, or
// one that must outlive its sandboxes: a devcontainer) injects the agent
// instead of making it the container's process: the program is copied
// to agentPath (once per container: a copy with the host program's size
// and time is kept), the sandbox's configuration to attachDir/ID, and one
// detached exec of the engine starts it as root in the container. Its
// socket, in the same directory, is reached through the container's
// root as the host sees it, /proc/PID/root of its first process: the
// engine must run on this host, and this process as root.
const attachDir = ".execbox" // relative to the container's root

// AttachOptions is what Attach needs to know of the container beyond the
// sandbox's Spec.
type AttachOptions struct {
	// Workspace is the workspace's path in the container: commands start
	// there and the file API is confined to it. Required: a clean
	// absolute path of an existing directory.
	Workspace string
	// Env, if not nil, is the environment under the spec's in every
	// command: the container's own with a runtime's changes (a
	// devcontainer.json's remoteEnv). Nil: the container's (its
	// Config.Env).
	Env []string
	// User is who commands run as when the spec names nobody: "name",
	// "uid", "name:group" or "uid:gid", names looked up in the
	// container's own /etc/passwd and /etc/group. Empty: the container's
	// user (its Config.User), root if it has none.
	User string
}

// Attach returns a sandbox whose commands run in the running container
// containerID, with the agent injected into it (see attachDir). Spec is
// as for Create, except that its Workspace and Image must be empty (the
// container's are what they are) and the container's limits are its
// own. The sandbox's Close stops the agent, and with it every process
// the sandbox started, and removes the sandbox's directory; the
// container and the agent program stay, for the next Attach.
//
// The agent is not the container's init, as it is in Create's: a command
// running as root in the container can kill it (calls then fail with
// ErrUnavailable saying so). A container whose engine is on another host
// is ErrUnavailable.
func (r *Runtime) Attach(ctx context.Context, containerID string, spec execbox.Spec, a AttachOptions) (_ *Sandbox, err error) {
	defer func() { err = boundary.CreateError(err) }()
	if err := r.checkAttach(&spec, a); err != nil {
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
	id, err := newID()
	if err != nil {
		return nil, err
	}
	var u undo.Stack
	defer u.OnError(&err)

	ct, err := openTarget(ctx, dc, containerID)
	if err != nil {
		return nil, err
	}
	u.Add(ct.close)
	log := r.log.With("sandbox", id, "container", ct.short())
	user := spec.User
	if user == nil {
		name := a.User
		if name == "" {
			name = ct.user
		}
		uu, err := ct.resolveUser(name)
		if err != nil {
			return nil, err
		}
		user = &uu
	}
	if err := ct.exists(a.Workspace, unix.O_DIRECTORY, unix.RESOLVE_NO_MAGICLINKS); err != nil {
		return nil, execbox.Invalid("workspace", "%s is not a directory in container %s: %v", a.Workspace, ct.short(), err)
	}
	env := a.Env
	if env == nil {
		env = ct.env
	}
	boot, err := bootJSON(id, a.Workspace, spec, imageInfo{env: env}, nil, user, attachCaps(r.Capabilities()))
	if err != nil {
		return nil, err
	}
	if err := r.injectAgent(ctx, dc, ct, agentBin); err != nil {
		return nil, err
	}
	run := path.Join(attachDir, id)
	if err := copyTar(ctx, dc, ct.id, []tarEntry{
		{name: run, mode: 0o700, dir: true},
		{name: path.Join(run, bootFile), mode: 0o600, body: bytes.NewReader(boot), size: int64(len(boot))},
	}); err != nil {
		return nil, fmt.Errorf("sandbox %s: copy the agent's configuration into container %s: %w", id, ct.short(), err)
	}
	u.Add(func() { ct.removeRun(id) })
	// The file just copied by the engine, seen through /proc/PID/root:
	// this is the container's file system, not another process's that
	// has the PID here (a PID namespace other than the engine's).
	if err := ct.exists(path.Join(run, bootFile), unix.O_NOFOLLOW, unix.RESOLVE_NO_SYMLINKS); err != nil {
		return nil, fmt.Errorf("sandbox %s: the container's files at /proc/%d/root are not the engine's (is the engine on another host, or in another PID namespace?): %v: %w",
			id, ct.pid, err, execbox.ErrUnavailable)
	}

	ag, err := startAgent(ctx, dc, ct, id)
	if err != nil {
		return nil, err
	}
	u.Add(func() { ag.stop(log) })
	started := time.Now()
	stopWatch := make(chan struct{})
	exited := ag.watch(ctx, dc, stopWatch)
	pin, err := waitSocket(ctx, "/"+path.Join(run, socketFile), func() (int, error) {
		return ct.open(path.Join(run, socketFile), unix.O_PATH|unix.O_NOFOLLOW, unix.RESOLVE_IN_ROOT|unix.RESOLVE_NO_SYMLINKS)
	}, exited, nil)
	close(stopWatch)
	if err != nil {
		if code, done := ag.exitCode(dc); done {
			err = fmt.Errorf("it exited with code %d: %w", code, execbox.ErrUnavailable)
		}
		return nil, fmt.Errorf("sandbox %s: the agent did not start in container %s: %w", id, ct.short(), err)
	}
	c, csb, err := connect(ctx, pin, started, log)
	if err != nil {
		pin.Close()
		return nil, fmt.Errorf("sandbox %s: reach the agent in container %s: %w", id, ct.short(), err)
	}
	sb := &Sandbox{r: r, dc: dc, id: id, cid: ct.id, workspace: a.Workspace, c: c, pin: pin}
	sb.detach = func() error {
		err := ag.stop(log)
		ct.removeRun(id)
		ct.close()
		return err
	}
	sb.Sandbox = boundary.New(id, csb, func(err error) error { return sb.lostAgent(ag, err) })
	u.Release() // sb.Close undoes everything from here
	if err := provision.Apply(ctx, sb, &spec); err != nil {
		sb.Close()
		return nil, err
	}
	log.Debug("attached")
	return sb, nil
}

// checkAttach refuses, before anything is done, a spec Attach cannot
// honour, naming every problem.
func (r *Runtime) checkAttach(spec *execbox.Spec, a AttachOptions) error {
	errs := []error{spec.Validate(), execbox.CheckLimits(Name, attachCaps(r.Capabilities()), spec.Limits, "limits."), execbox.CheckServerFields(Name, spec)}
	if spec.Image != "" {
		errs = append(errs, &execbox.FieldError{Field: "image", Kind: execbox.ErrUnsupported,
			Problem: "a running container's image is its own"})
	}
	if spec.Workspace != "" {
		errs = append(errs, execbox.Invalid("workspace", "a running container's workspace is a directory in it (AttachOptions.Workspace), not a host directory"))
	}
	if !path.IsAbs(a.Workspace) || path.Clean(a.Workspace) != a.Workspace || a.Workspace == "/" {
		errs = append(errs, execbox.Invalid("workspace", "%q must be a clean absolute path in the container other than /", a.Workspace))
	}
	return errors.Join(errs...)
}

// attachCaps is what a sandbox of Attach enforces: its image is the
// container's.
func attachCaps(c execbox.Capabilities) execbox.Capabilities {
	c.Images = false
	return c
}

// lostAgent explains a call that could not reach an attached agent: the
// agent exited (killed by a command) while the container runs, or what
// happened to the container.
func (s *Sandbox) lostAgent(ag *agentProc, err error) error {
	code, done := ag.exitCode(s.dc)
	if !done {
		return s.lost(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, ierr := s.dc.ContainerInspect(ctx, s.cid, client.ContainerInspectOptions{})
	if ierr != nil || res.Container.State == nil || !res.Container.State.Running {
		return s.lost(err)
	}
	return fmt.Errorf("sandbox %s: its agent in container %.12s is gone (exited with code %d; killed by a command?): %w", s.id, s.cid, code, execbox.ErrUnavailable)
}

// target is a running container as Attach reaches it: by the engine, and
// on the host through its first process's root.
type target struct {
	id   string
	pid  int
	root int // /proc/PID/root, O_PATH
	env  []string
	user string

	closeOnce sync.Once
}

func (t *target) short() string { return t.id[:min(12, len(t.id))] }

// openTarget inspects the container and opens its root.
func openTarget(ctx context.Context, dc *client.Client, cid string) (*target, error) {
	inspect := func() (container.InspectResponse, error) {
		res, err := dc.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
		if err != nil {
			return container.InspectResponse{}, fmt.Errorf("container %s: %w", cid, engineErr(err))
		}
		c := res.Container
		if c.State == nil || !c.State.Running || c.State.Pid <= 0 {
			return c, fmt.Errorf("container %.12s is not running: %w", cid, execbox.ErrUnavailable)
		}
		if c.State.Paused || c.State.Restarting {
			return c, fmt.Errorf("container %.12s is paused or restarting: %w", cid, execbox.ErrUnavailable)
		}
		return c, nil
	}
	c, err := inspect()
	if err != nil {
		return nil, err
	}
	t := &target{id: c.ID, pid: c.State.Pid}
	if c.Config != nil {
		t.env, t.user = c.Config.Env, c.Config.User
	}
	t.root, err = unix.Open("/proc/"+strconv.Itoa(t.pid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("container %s: its files are not reachable from here at /proc/%d/root (the engine must run on this host, and execbox as root): %v: %w",
			t.short(), t.pid, err, execbox.ErrUnavailable)
	}
	// The PID was the container's when opened if it still is now.
	if again, err := inspect(); err != nil || again.State.Pid != t.pid {
		unix.Close(t.root)
		if err == nil {
			err = fmt.Errorf("container %s restarted: %w", t.short(), execbox.ErrUnavailable)
		}
		return nil, err
	}
	return t, nil
}

func (t *target) close() { t.closeOnce.Do(func() { unix.Close(t.root) }) }

// open opens name (relative to the container's root, or absolute in it)
// with openat2, resolving it as the container would (RESOLVE_IN_ROOT) or
// more strictly.
func (t *target) open(name string, flags int, resolve uint64) (int, error) {
	for {
		fd, err := unix.Openat2(t.root, strings.TrimPrefix(name, "/"), &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: resolve | unix.RESOLVE_IN_ROOT})
		if err != unix.EINTR && err != unix.EAGAIN {
			return fd, err
		}
	}
}

// exists reports why name cannot be opened with flags (and O_PATH), nil
// if it can.
func (t *target) exists(name string, flags int, resolve uint64) error {
	fd, err := t.open(name, flags|unix.O_PATH, resolve)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// resolveUser resolves a user as the container's files name it.
func (t *target) resolveUser(spec string) (execbox.User, error) {
	u, err := imageuser.Resolve(spec, t.short(), func(name string) (io.ReadCloser, error) {
		fd, err := t.open(name, unix.O_RDONLY, unix.RESOLVE_NO_MAGICLINKS)
		if err != nil {
			return nil, err
		}
		f := os.NewFile(uintptr(fd), name)
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			f.Close()
			return nil, fs.ErrNotExist
		}
		return f, nil
	})
	var fe *execbox.FieldError
	if errors.As(err, &fe) {
		_, why, _ := strings.Cut(fe.Problem, ": ")
		return u, execbox.Invalid("user", "%q in container %s: %s", spec, t.short(), why)
	}
	return u, err
}

// owner is the owner of the container's root directory: its root user as
// the host sees it (another uid under user namespace remapping).
func (t *target) owner() (uint32, error) {
	var st unix.Stat_t
	if err := unix.Fstat(t.root, &st); err != nil {
		return 0, err
	}
	return st.Uid, nil
}

// injectMu serializes copies of the agent into one container (by ID).
var injectMu sync.Map

// injectAgent copies the agent program to agentPath in the container,
// unless a copy of it is there: a regular file of the root's, with the
// host program's size and modification time. The directory must be the
// root's and writable by nobody else, or the program could be replaced
// between the copy and its start.
func (r *Runtime) injectAgent(ctx context.Context, dc *client.Client, ct *target, bin string) error {
	m, _ := injectMu.LoadOrStore(ct.id, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()
	f, err := os.Open(bin)
	if err != nil {
		return fmt.Errorf("agent program: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("agent program: %w", err)
	}
	root, err := ct.owner()
	if err != nil {
		return err
	}
	mtime := fi.ModTime().Truncate(time.Second)
	var st unix.Stat_t
	if fd, err := ct.open(attachDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, unix.RESOLVE_NO_SYMLINKS); err == nil {
		err := unix.Fstat(fd, &st)
		unix.Close(fd)
		if err != nil || st.Uid != root || st.Mode&0o022 != 0 {
			return fmt.Errorf("container %s: /%s is not execbox's (owner %d, mode %#o): %w", ct.short(), attachDir, st.Uid, st.Mode&0o7777, execbox.ErrPermission)
		}
		if fd, err := ct.open(agentPath, unix.O_PATH|unix.O_NOFOLLOW, unix.RESOLVE_NO_SYMLINKS); err == nil {
			err := unix.Fstat(fd, &st)
			unix.Close(fd)
			// Root's in the container, or the host's root's (a
			// bind mount of the host's program, as a runtime built on
			// this one may make).
			if err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && (st.Uid == root || st.Uid == 0) && st.Mode&0o022 == 0 &&
				st.Size == fi.Size() && st.Mtim.Sec == mtime.Unix() {
				return nil
			}
		}
	}
	if err := copyTar(ctx, dc, ct.id, []tarEntry{
		{name: attachDir, mode: 0o755, dir: true},
		{name: strings.TrimPrefix(agentPath, "/"), mode: 0o755, body: f, size: fi.Size(), mtime: mtime},
	}); err != nil {
		return fmt.Errorf("copy the agent into container %s: %w", ct.short(), err)
	}
	return nil
}

// tarEntry is a directory or file copyTar writes, owned by root.
type tarEntry struct {
	name  string
	dir   bool
	mode  int64
	body  io.Reader
	size  int64
	mtime time.Time
}

// copyTar extracts entries at the container's root, through the engine.
func copyTar(ctx context.Context, dc *client.Client, cid string, entries []tarEntry) error {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		var err error
		for _, e := range entries {
			h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: e.mtime, Typeflag: tar.TypeReg, Size: e.size}
			if h.ModTime.IsZero() {
				h.ModTime = time.Now().Truncate(time.Second)
			}
			if e.dir {
				h.Name, h.Typeflag, h.Size = e.name+"/", tar.TypeDir, 0
			}
			if err = tw.WriteHeader(h); err != nil {
				break
			}
			if e.body != nil {
				if _, err = io.CopyN(tw, e.body, e.size); err != nil {
					break
				}
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	_, err := dc.CopyToContainer(ctx, cid, client.CopyToContainerOptions{DestinationPath: "/", Content: pr})
	pr.CloseWithError(errors.New("copy ended")) // unblocks the writer if the engine stopped reading
	return engineErr(err)
}

// removeRun removes the sandbox's directory from the container, if it
// is still there: the configuration, and the socket the agent leaves
// only if it was killed.
func (t *target) removeRun(id string) {
	dir, err := t.open(attachDir, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY, unix.RESOLVE_NO_SYMLINKS)
	if err != nil {
		return
	}
	defer unix.Close(dir)
	run, err := unix.Openat2(dir, id, &unix.OpenHow{Flags: unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_RDONLY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH})
	if err != nil {
		return
	}
	for _, name := range []string{bootFile, socketFile} {
		_ = unix.Unlinkat(run, name, 0)
	}
	unix.Close(run)
	_ = unix.Unlinkat(dir, id, unix.AT_REMOVEDIR)
}

// agentProc is an agent started by an exec of the engine, pinned by a
// pidfd on this host.
type agentProc struct {
	execID string
	pid    int
	pidfd  int

	stopOnce sync.Once
	stopErr  error
}

// startAgent starts the agent of sandbox id in the container, detached,
// and pins its process.
func startAgent(ctx context.Context, dc *client.Client, ct *target, id string) (*agentProc, error) {
	run := "/" + path.Join(attachDir, id)
	ex, err := dc.ExecCreate(ctx, ct.id, client.ExecCreateOptions{
		User:       "0:0", // the agent; commands run as the user its Boot names
		WorkingDir: "/",
		Cmd:        []string{agentPath, "--listen", "unix:" + path.Join(run, socketFile), "--config", path.Join(run, bootFile), "--log-level", "warn"},
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: create the agent's exec in container %s: %w", id, ct.short(), engineErr(err))
	}
	started := time.Now()
	if _, err := dc.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return nil, fmt.Errorf("sandbox %s: start the agent in container %s: %w", id, ct.short(), engineErr(err))
	}
	res, err := dc.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: the agent's exec in container %s: %w", id, ct.short(), engineErr(err))
	}
	if !res.Running || res.PID <= 0 {
		return nil, fmt.Errorf("sandbox %s: the agent exited at once in container %s with code %d: %w", id, ct.short(), res.ExitCode, execbox.ErrUnavailable)
	}
	pidfd, err := unix.PidfdOpen(res.PID, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: the agent (PID %d) in container %s: %w: %w", id, res.PID, ct.short(), err, execbox.ErrUnavailable)
	}
	ag := &agentProc{execID: ex.ID, pid: res.PID, pidfd: pidfd}
	// The PID is the agent's if its command line names this sandbox,
	// once the runtime's own part of the exec (runc init) has executed
	// it.
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(res.PID) + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(run+"/")) {
			return ag, nil
		}
		if err != nil || ag.done(delay) || time.Since(started) > 10*time.Second {
			unix.Close(pidfd)
			if code, done := ag.exitCode(dc); done && err == nil {
				return nil, fmt.Errorf("sandbox %s: the agent exited at once in container %s with code %d: %w", id, ct.short(), code, execbox.ErrUnavailable)
			}
			return nil, fmt.Errorf("sandbox %s: the engine's PID %d of the agent is another process here (%q; is the engine in another PID namespace?): %w", id, res.PID, cmdline, execbox.ErrUnavailable)
		}
	}
}

// done reports whether the agent has exited, waiting at most timeout.
func (a *agentProc) done(timeout time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(a.pidfd), Events: unix.POLLIN}}
	ms := int(timeout / time.Millisecond)
	deadline := time.Now().Add(timeout)
	for {
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			ms = max(0, int(time.Until(deadline)/time.Millisecond))
			continue
		}
		return err == nil && n > 0
	}
}

// exitCode is the agent's exit code, once it has exited.
func (a *agentProc) exitCode(dc *client.Client) (int, bool) {
	if !a.done(0) {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for delay := time.Millisecond; ; delay *= 2 {
		res, err := dc.ExecInspect(ctx, a.execID, client.ExecInspectOptions{})
		if err != nil {
			return -1, true
		}
		if !res.Running || delay > time.Second {
			return res.ExitCode, true // the engine may learn of the exit a moment later
		}
		time.Sleep(delay)
	}
}

// watch sends the agent's exit on the channel it returns, until stop is
// closed or ctx is done.
func (a *agentProc) watch(ctx context.Context, dc *client.Client, stop <-chan struct{}) <-chan container.WaitResponse {
	ch := make(chan container.WaitResponse, 1)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			if a.done(50 * time.Millisecond) {
				code, _ := a.exitCode(dc)
				ch <- container.WaitResponse{StatusCode: int64(code)}
				return
			}
		}
	}()
	return ch
}

// stop stops the agent: SIGTERM, on which it kills everything the
// sandbox started and exits; SIGKILL if it has not within the time that
// takes. It is idempotent.
func (a *agentProc) stop(log interface{ Warn(string, ...any) }) error {
	a.stopOnce.Do(func() {
		defer unix.Close(a.pidfd)
		if err := unix.PidfdSendSignal(a.pidfd, unix.SIGTERM, nil, 0); err != nil {
			if err != unix.ESRCH {
				a.stopErr = fmt.Errorf("stop the agent (PID %d): %w", a.pid, err)
			}
			return
		}
		if a.done(15 * time.Second) {
			return
		}
		log.Warn("the agent did not exit on SIGTERM: killing it", "pid", a.pid)
		_ = unix.PidfdSendSignal(a.pidfd, unix.SIGKILL, nil, 0)
		if !a.done(10 * time.Second) {
			a.stopErr = fmt.Errorf("the agent (PID %d) survived SIGKILL for 10s", a.pid)
		}
	})
	return a.stopErr
}

// Engine is the runtime's client of the Docker engine, for runtimes
// built on this one.
func (r *Runtime) Engine() (*client.Client, error) { return r.engine() }

// isFile reports whether name in the container (not following a last
// symbolic link) is the host file pin (O_PATH) is: same device and inode.
func (t *target) isFile(name string, pin *os.File) bool {
	var want, got unix.Stat_t
	if err := unix.Fstat(int(pin.Fd()), &want); err != nil {
		return false
	}
	fd, err := t.open(name, unix.O_PATH|unix.O_NOFOLLOW, unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return unix.Fstat(fd, &got) == nil && got.Dev == want.Dev && got.Ino == want.Ino
}

// VerifyMounts checks that what the engine mounted in the running
// container at each target is the host file or directory its pin (an
// O_PATH descriptor, opened when the source was checked) is: the engine
// resolves a source path again, and anything that could write one of
// its parents meanwhile could have made it lead elsewhere (to /etc). A
// mismatch is ErrPermission naming the target.
func (r *Runtime) VerifyMounts(ctx context.Context, containerID string, pins map[string]*os.File) error {
	dc, err := r.engine()
	if err != nil {
		return fmt.Errorf("docker client: %v: %w", err, execbox.ErrUnavailable)
	}
	ct, err := openTarget(ctx, dc, containerID)
	if err != nil {
		return err
	}
	defer ct.close()
	var errs []error
	for target, pin := range pins {
		if !ct.isFile(target, pin) {
			errs = append(errs, &execbox.FieldError{Field: "mounts", Kind: execbox.ErrPermission,
				Problem: fmt.Sprintf("what is mounted at %s in container %s is not %s as it was checked (a parent directory was replaced?): refused", target, ct.short(), pin.Name())})
		}
	}
	return errors.Join(errs...)
}

// AgentBinary is the agent program (Options.AgentBinary, this one if
// static, or a static build of it made once),
// for a runtime built on this one to bind-mount read-only at
// /.execbox/agent in a container it makes: Attach then has nothing to
// copy.
func (r *Runtime) AgentBinary(ctx context.Context) (string, error) { return r.agentBin(ctx) }

// AgentPath is where the agent program is in a container.
const AgentPath = agentPath

// EnsureImage makes sure the engine has the image ref, pulling it as
// Options.Pull says, and returns its ID. A missing one is a
// *execbox.FieldError naming "image".
func (r *Runtime) EnsureImage(ctx context.Context, ref string) (string, error) {
	dc, err := r.engine()
	if err != nil {
		return "", fmt.Errorf("docker client: %v: %w", err, execbox.ErrUnavailable)
	}
	info, err := r.ensureImage(ctx, dc, ref)
	return info.id, err
}

// ContainerUser resolves user ("name", "uid", "name:group", "uid:gid";
// "" is root) as the running container's own files name it.
func (r *Runtime) ContainerUser(ctx context.Context, containerID, user string) (execbox.User, error) {
	dc, err := r.engine()
	if err != nil {
		return execbox.User{}, fmt.Errorf("docker client: %v: %w", err, execbox.ErrUnavailable)
	}
	ct, err := openTarget(ctx, dc, containerID)
	if err != nil {
		return execbox.User{}, err
	}
	defer ct.close()
	return ct.resolveUser(user)
}

// Owner is this process as the dev.execbox.owner label of the containers
// this runtime makes names it; OwnerAlive reports whether such a label
// names a process that still runs (or one of another host's).
func (r *Runtime) Owner() string { return r.owner }

// OwnerAlive: see Owner.
func OwnerAlive(label string) bool { return owner.Alive(label) }
