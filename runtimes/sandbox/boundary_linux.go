package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/execbox/execbox/runtimes/sandbox/internal/cgroups"
	"golang.org/x/sys/unix"
)

// initStartTimeout bounds how long the init may take to build the
// boundary.
const initStartTimeout = 30 * time.Second

// initProc is the running init of a sandbox, a child of this process.
type initProc struct {
	cmd *exec.Cmd
	// started is closed once the init was forked (cmd.Process set) or
	// could not be (startErr).
	started  chan struct{}
	startErr error
	done     chan struct{} // closed once the init has been reaped (or never started)

	// Until configure: the host's end of the configuration socket, the
	// status pipe, and whether the init started in its cgroup's "agent"
	// (cgroups.Sandbox.EnterAgent) rather than at its top (AddInit).
	conf    *os.File
	statusR *os.File
	inAgent bool
}

// kill ends the init, and with it the PID namespace: the kernel kills
// every process left in it. It waits until the init is reaped.
func (p *initProc) kill(timeout time.Duration) error {
	deadline := time.After(timeout)
	select {
	case <-p.started:
	case <-deadline:
		return fmt.Errorf("sandbox init: not started after %v", timeout)
	}
	if p.startErr == nil {
		_ = p.cmd.Process.Kill()
	}
	p.release()
	select {
	case <-p.done:
		return nil
	case <-deadline:
		return fmt.Errorf("sandbox init (PID %d) survived SIGKILL for %v", p.cmd.Process.Pid, timeout)
	}
}

// release closes what configure would have used.
func (p *initProc) release() {
	for _, f := range []*os.File{p.conf, p.statusR} {
		if f != nil {
			f.Close()
		}
	}
	p.conf, p.statusR = nil, nil
}

// initLaunch is what the init needs before its configuration: the
// namespaces it is made in and its identity.
type initLaunch struct {
	base    uint32       // host uid and gid of the sandbox's uid 0
	sub     *subordinate // rootless: newuidmap, or nil
	oneUID  bool         // rootless: one uid mapped (uid, gid)
	uid     uint32
	gid     uint32
	network Network
	env     []string
	binary  string // the program the init runs (Options.AgentBinary); "": this one
}

// launchInit starts the boundary's init in new user, mount, PID, IPC, UTS
// (and network, unless the host's is shared) namespaces, with uids and
// gids 0-65535 mapped to l.base..l.base+65535, in cg (v1: forked from a
// thread in cg's "agent", so that it is there from its first instruction;
// else moved there before it reads anything). It returns at once, the
// fork under way on a thread of its own, and the init, once started,
// waits for configure: the caller prepares the rest of the sandbox
// (workspace, socket, root directory) meanwhile, while the kernel makes
// the namespaces and the init executes the binary and initialises its
// runtime, several milliseconds.
//
// Rootless, the mapping is one uid (l.oneUID), or, with l.sub, every
// inside id, written by newuidmap and newgidmap once the init started.
func launchInit(l initLaunch, cg *cgroups.Sandbox, log *slog.Logger) (*initProc, error) {
	f, err := openInitFiles()
	if err != nil {
		return nil, err
	}
	rootless := l.oneUID || l.sub != nil
	cmd := initCmd(l, rootless, f)
	p := &initProc{cmd: cmd, started: make(chan struct{}), done: make(chan struct{}), conf: f.confW, statusR: f.statusR}
	// From here, p.run owns the child's ends of the pipes and closes them
	// once the child has its own copies.
	childEnds := []*os.File{f.confR, f.statusW, f.logW}
	go relayLog(f.logR, log)
	go p.run(l, cg, rootless, childEnds, log)
	return p, nil
}

// initFiles are the pipes and the socket between the host and the init,
// both ends of each.
type initFiles struct {
	statusR, statusW *os.File // the init's status: "ok", or why not
	logR, logW       *os.File // the init's and agent's output (relayLog)
	// The configuration, and with it the listener and workspace
	// descriptors (SCM_RIGHTS), come over a socket.
	confW, confR *os.File
}

// openInitFiles opens the init's pipes and configuration socket, or
// none: on failure, it closes what it opened.
func openInitFiles() (f initFiles, err error) {
	var opened []*os.File
	defer func() {
		if err != nil {
			for _, o := range opened {
				o.Close()
			}
		}
	}()
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		r, w, err = os.Pipe()
		if err == nil {
			opened = append(opened, r, w)
		}
		return r, w
	}
	f.statusR, f.statusW = pipe()
	f.logR, f.logW = pipe()
	if err != nil {
		return f, err
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return f, fmt.Errorf("config socket: %w", err)
	}
	f.confW, f.confR = os.NewFile(uintptr(sp[0]), "config"), os.NewFile(uintptr(sp[1]), "config")
	return f, nil
}

// initCmd is the command that starts the init: this binary as
// initArg0, in its namespaces, with its identity, the child's ends of f
// and the boundary's environment alone.
func initCmd(l initLaunch, rootless bool, f initFiles) *exec.Cmd {
	flags := syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
	if l.network != NetworkHost {
		flags |= syscall.CLONE_NEWNET
	}
	idmap := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(l.base), Size: rangeSize}}
	bin := "/proc/self/exe"
	if l.binary != "" {
		bin = l.binary
	}
	cmd := &exec.Cmd{
		Path:       bin,
		Args:       []string{initArg0},
		Env:        l.env,
		Dir:        "/",
		Stdout:     f.logW,
		Stderr:     f.logW,
		ExtraFiles: []*os.File{f.confR, f.statusW},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 uintptr(flags),
			UidMappings:                idmap,
			GidMappings:                idmap,
			GidMappingsEnableSetgroups: true,
			// The namespace's root: this process's own uid (0 on the
			// host) is not mapped in it.
			Credential: &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}},
			Setsid:     true,
			// Pdeathsig follows the thread that forks: initProc.run
			// keeps its thread locked, parked in Wait, for as long as
			// the init lives, so the signal comes when this process dies
			// and never earlier.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if rootless {
		// One uid mapped, the caller's own, with no setgroups (the kernel
		// refuses it to an unprivileged mapper); or none yet, for the
		// helpers to write. The init is not root inside either way, so it
		// takes its namespace's capabilities as ambient.
		a := cmd.SysProcAttr
		a.UidMappings, a.GidMappings = nil, nil
		if l.oneUID {
			a.UidMappings, a.GidMappings = rootlessIDMaps(l.uid, l.gid)
		}
		a.GidMappingsEnableSetgroups = false
		a.Credential = nil
		a.AmbientCaps = allCaps()
	}
	return cmd
}

// run, the goroutine of launchInit, forks the init (start) from a thread
// it locks for the init's life, closes childEnds once the child has its
// own copies, and waits for the init there: Pdeathsig follows the thread
// that forks. It closes p.started once the init was forked or could not
// be, and p.done once it has been reaped (or never started).
func (p *initProc) run(l initLaunch, cg *cgroups.Sandbox, rootless bool, childEnds []*os.File, log *slog.Logger) {
	runtime.LockOSThread()
	stuck, err := p.start(l, cg, rootless, log)
	for _, f := range childEnds {
		f.Close() // the child holds its own copies
	}
	if err != nil {
		p.startErr = fmt.Errorf("start sandbox init: %w", err)
		close(p.started)
		close(p.done)
		if !stuck {
			runtime.UnlockOSThread()
		}
		return // stuck: still locked, the thread exits
	}
	close(p.started)
	// Locked, parked here for the init's life (Pdeathsig).
	_ = p.cmd.Wait()
	close(p.done)
	runtime.UnlockOSThread()
}

// start forks the init from the calling thread, locked: in the init's
// cgroup's "agent" where that can be (v1; p.inAgent), and as the
// sandbox's host uid unless rootless (ownNamespacesAs), both undone after
// the fork. stuck says the thread could not be restored, so that it must
// exit, not go back to the runtime; an init started from it is then
// killed, and err set.
func (p *initProc) start(l initLaunch, cg *cgroups.Sandbox, rootless bool, log *slog.Logger) (stuck bool, err error) {
	cmd := p.cmd
	// v1: fork the init from inside its cgroup; else AddInit moves it
	// there (configure).
	leave, entered, err := cg.EnterAgent()
	p.inAgent = entered && err == nil
	restore := func() error { return nil }
	if err == nil && !rootless {
		// Rootless, the namespace is the caller's own already.
		restore, err = ownNamespacesAs(l.base)
	}
	if err == nil {
		err = cmd.Start()
		if rerr := restore(); rerr != nil {
			// The thread is not root again: it must die, not go back
			// to the runtime; an init started from it dies with it.
			log.Error("restore the forking thread's uid", "err", rerr)
			stuck = true
			if err == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				err = rerr
			}
		}
	}
	if entered && !stuck {
		if lerr := leave(); lerr != nil {
			// The thread is stuck in the sandbox's cgroup, whose
			// Destroy would kill this process: it exits, and the init
			// started from it with it.
			log.Error("move the forking thread out of the sandbox's cgroup", "err", lerr)
			stuck = true
			if err == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				err = lerr
			}
		}
	}
	return stuck, err
}

// configure waits until the init was forked, finishes placing it (the
// subordinate ids of a rootless one; AddInit where it did not start in
// its cgroup), sends it its configuration, cfg, with the agent's
// listener, the workspace's detached mount and the image root's (either
// may be nil), and waits until it reports the boundary built and the
// agent started. The caller may close the files when configure returns. On
// failure the caller kills the init.
func (p *initProc) configure(ctx context.Context, l initLaunch, cfg *bootConfig, listener, wsMount, rootMount *os.File, cg *cgroups.Sandbox) error {
	defer p.release()
	select {
	case <-p.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.startErr != nil {
		return p.startErr
	}
	if l.sub != nil {
		// The init waits for its configuration, which comes after this.
		if err := l.sub.write(ctx, p.cmd.Process.Pid, l.uid, l.gid); err != nil {
			return err
		}
	}
	if !p.inAgent {
		if err := cg.AddInit(p.cmd.Process.Pid); err != nil {
			return err
		}
	}
	cfg.CgroupInAgent = p.inAgent
	fds := []int{int(listener.Fd())}
	if wsMount != nil {
		fds = append(fds, int(wsMount.Fd()))
	}
	if rootMount != nil {
		fds = append(fds, int(rootMount.Fd()))
	}
	if err := unix.Sendmsg(int(p.conf.Fd()), []byte{0}, unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL); err != nil {
		return fmt.Errorf("send descriptors to sandbox init: %w", err)
	}
	if err := json.NewEncoder(p.conf).Encode(cfg); err != nil {
		return fmt.Errorf("send config to sandbox init: %w", err)
	}
	p.conf.Close()
	p.conf = nil

	line := make(chan string, 1)
	go func(r *os.File) {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}(p.statusR)
	select {
	case s := <-line:
		if s != "ok" {
			if s == "" {
				s = "exited without a status"
			}
			return fmt.Errorf("sandbox init: %s", s)
		}
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(initStartTimeout):
		return errors.New("sandbox init did not report within " + initStartTimeout.String())
	}
	return cg.Seal()
}

// relayLog copies the init's and agent's output (JSON log lines, or a
// panic) to log at debug level until the boundary ends.
func relayLog(r *os.File, log *slog.Logger) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		log.Debug("boundary", "line", sc.Text())
	}
}

// ownNamespacesAs makes the calling thread's effective uid owner (keeping
// its capabilities) until the returned function restores it, so that the
// user namespace it creates for the init belongs to owner, the sandbox's
// host uid, and not to root. The kernel charges the per-user counts of
// everything inside a user namespace (inotify instances and watches,
// POSIX message queue bytes, pending signals) to the namespace's owner as
// well: owned by root, one sandbox could take all of host root's, for
// every root daemon and every other sandbox. Credentials are per thread
// here: the raw system calls act on this locked thread alone.
func ownNamespacesAs(owner uint32) (restore func() error, err error) {
	prev, err := unix.PrctlRetInt(unix.PR_GET_SECUREBITS, 0, 0, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("securebits: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(prev|secbitNoSetuidFixup), 0, 0, 0); err != nil {
		return nil, fmt.Errorf("securebits: %w", err)
	}
	none := ^uintptr(0)
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, none, uintptr(owner), none); e != 0 {
		unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(prev), 0, 0, 0)
		return nil, fmt.Errorf("set the effective uid to %d: %w", owner, e)
	}
	return func() error {
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, none, 0, none); e != 0 {
			return fmt.Errorf("set the effective uid back to 0: %w", e)
		}
		return unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(prev), 0, 0, 0)
	}, nil
}
