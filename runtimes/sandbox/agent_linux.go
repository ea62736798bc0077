package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/agent"
	"github.com/execbox/execbox/internal/agent/proc"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/runtimes/sandbox/internal/cgroups"
	"golang.org/x/sys/unix"
)

// runAgent is the in-boundary agent: internal/agent serving the protocol
// on the listener the host created, with a cgroup per command.
func runAgent() int {
	// Commands, root inside included, must not trace the agent or open
	// its /proc entries (fd, environ, mem); exec made it dumpable again.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "execbox agent: prctl(PR_SET_DUMPABLE): %v\n", err)
		return 2
	}
	// The agent's cgroup caps its memory (cgroups.AgentMemory): collect
	// garbage hard before that, rather than be OOM-killed holding the
	// output of commands that are done with it.
	debug.SetMemoryLimit(cgroups.AgentMemory * 3 / 4)
	lastBounding = highestBounding()
	raw := os.Getenv(agentConfigEnv)
	os.Unsetenv(agentConfigEnv) // the agent's environment is what EnvInherit passes
	var cfg agentConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "execbox agent: config: %v\n", err)
		return 2
	}
	level := slog.LevelInfo
	if cfg.Debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := serveAgent(cfg, log); err != nil {
		log.Error("agent stopped", "err", err)
		return 1
	}
	return 0
}

// serveAgent is agent.Serve with this boundary's hooks: a cgroup per
// command from the sandbox's tree, the agent's uid reserved, and file
// operations done as the workspace's user.
func serveAgent(cfg agentConfig, log *slog.Logger) error {
	lf := os.NewFile(fdListener, "listener")
	ln, err := net.FileListener(lf)
	lf.Close() // FileListener made its own copy
	if err != nil {
		return fmt.Errorf("listener: %w", err)
	}
	acfg, err := cfg.Boot.Config()
	if err != nil {
		return err
	}
	// The cgroup handles (fdCgroup on) must reach no command.
	for fd := fdCgroup; fd < fdCgroup+len(cfg.CgroupDirs); fd++ {
		unix.CloseOnExec(fd)
	}
	// No cgroup (rootless without a delegated subtree): each command's
	// scope only starts it without the agent's capabilities, and its tree
	// is found by process group and ancestry (internal/agent/proc).
	var tree *cgroups.Tree
	if cfg.CgroupVersion != 0 {
		if tree, err = cgroups.OpenTree(cfg.CgroupVersion, cfg.CgroupDirs, cfg.CgroupHome, cfg.Limits); err != nil {
			return err
		}
		defer tree.Close()
		if !cfg.OneUID {
			// With one uid, the agent's is the only one: nothing to give.
			tree.SetOwner(cgroups.Owner{UID: AgentID, GID: AgentID})
		}
	}
	acfg.Logger = log
	acfg.ReservedIDs = []uint32{AgentID}
	acfg.FilesAs = &agent.Owner{UID: int(cfg.UID), GID: int(cfg.GID)}
	acfg.Scope = func(l execbox.Limits) (proc.Scope, error) {
		if tree == nil {
			return &scope{}, nil
		}
		c, err := tree.NewChild(cgroups.Limits{Memory: l.Memory, PIDs: l.PIDs, CPUs: l.CPUs})
		if err != nil {
			return nil, err
		}
		return &scope{c: c, memory: l.Memory}, nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return agent.Serve(ctx, ln, acfg, server.Options{Logger: log})
}

// releaseInheritable empties, on the calling thread, the capability sets
// a child of it could inherit: the ambient and inheritable sets (with
// which the init passed the agent's capabilities across its exec) and the
// bounding set. The thread keeps its permitted and effective capabilities,
// which no exec passes on: securebits' noroot (locked by the init) keeps
// even a root command from gaining any, and no_new_privs any file
// capability. Capabilities are per thread and a child inherits its forking
// thread's, so this runs on the locked thread that forks each command: it
// works in every build (AllThreadsSyscall does not with cgo) and costs a
// few dozen system calls instead of an exec of a shim per command.
func releaseInheritable() error {
	// The last step drops the bounding set in order: a thread without
	// the highest capability the agent started with has done all of it
	// already (threads are reused, and a new thread inherits the sets of
	// the one that made it).
	if c := lastBounding; c >= 0 {
		if have, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_READ, uintptr(c), 0); errno == 0 && have == 0 {
			return nil
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if data[0].Inheritable != 0 || data[1].Inheritable != 0 {
		data[0].Inheritable, data[1].Inheritable = 0, 0
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			return fmt.Errorf("clear inheritable capabilities: %w", err)
		}
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// lastBounding is the highest capability in the agent's bounding set when
// it started, or -1 (see releaseInheritable). runAgent sets it before it
// serves; no other process needs it.
var lastBounding = -1

// highestBounding returns the highest capability in the calling thread's
// bounding set, or -1.
func highestBounding() int {
	for c := unix.CAP_LAST_CAP; c >= 0; c-- {
		if have, _, errno := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_READ, uintptr(c), 0); errno == 0 && have == 1 {
			return c
		}
	}
	return -1
}

// scope adapts a cgroup child to proc.Scope, and turns what the cgroup
// saw into the Result: a SIGKILL that comes with an OOM kill is
// ReasonOOMKilled. Without a cgroup (c nil) it only starts the command.
type scope struct {
	c      *cgroups.Child
	memory int64
}

// Start starts cmd in the command's cgroup from a thread that has given
// up every capability a command could inherit (releaseInheritable).
func (s *scope) Start(cmd *exec.Cmd) error {
	if s.c != nil {
		return s.c.Start(cmd, releaseInheritable)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := releaseInheritable(); err != nil {
		return err
	}
	return cmd.Start()
}

func (s *scope) Signal(sig syscall.Signal) int {
	if s.c == nil {
		return 0
	}
	return s.c.Signal(sig)
}

func (s *scope) Finish(res *execbox.Result) {
	if s.c == nil {
		return
	}
	defer s.c.Release()
	if res == nil {
		return
	}
	if peak := s.c.PeakMemory(); peak > 0 {
		res.PeakMemory = peak
	}
	if !s.c.OOMKilled() {
		return
	}
	limit := fmt.Sprintf("the memory limit of %d bytes", s.memory)
	switch {
	case res.Signal == execbox.SIGKILL && (res.Reason == execbox.ReasonSignaled || res.Reason == execbox.ReasonKilled):
		res.Reason = execbox.ReasonOOMKilled
		res.Detail = "killed for exceeding " + limit
	case res.Reason == execbox.ReasonExited && res.Detail == "":
		res.Detail = "a process of the command was killed for exceeding " + limit
	}
}
