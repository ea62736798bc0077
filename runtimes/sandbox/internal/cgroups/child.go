//go:build linux

package cgroups

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Tree is a sandbox's cgroup as mounted inside its boundary, where the
// agent makes a child cgroup per command. Its methods are safe for
// concurrent use.
type Tree struct {
	version int
	dirs    map[string]string // v1: by controller; v2: ""
	home    map[string]string // where the agent's threads live (v1)
	limits  Limits            // the sandbox's own
	owner   *Owner            // to whom new children are given, or nil

	seq atomic.Uint64

	mu        sync.Mutex
	lingering []*Child // finished commands' cgroups that still hold processes

	launcher launcher // v1: the thread that forks commands

	oomOnce sync.Once
	oomFile *os.File // the tree's OOM kill counter, or nil
}

// OpenTree returns the tree of a version 1 or 2 hierarchy mounted at dirs
// (v1: one directory per controller; v2: one under ""), whose own limits
// are limits: a command asking for the same limit needs no cgroup of its
// own for it. home are the directories where the calling process lives
// (v1), to which a thread that started a command returns.
func OpenTree(version int, dirs, home map[string]string, limits Limits) (*Tree, error) {
	if version != 1 && version != 2 {
		return nil, fmt.Errorf("cgroups: version %d", version)
	}
	if version == 1 && dirs["pids"] == "" || version == 2 && dirs[""] == "" {
		return nil, errors.New("cgroups: tree without a pids or unified hierarchy")
	}
	return &Tree{version: version, dirs: dirs, home: home, limits: limits}, nil
}

// OOMKills returns the sandbox's OOM kill counter.
// It is read twice per command, through a descriptor opened once: an
// open of a cgroup file costs several times its read.
func (t *Tree) OOMKills() uint64 {
	t.oomOnce.Do(func() {
		var path string
		if d, ok := t.dirs["memory"]; ok {
			path = filepath.Join(d, "memory.oom_control")
		} else if d, ok := t.dirs[""]; ok {
			path = filepath.Join(d, "memory.events")
		}
		if path != "" {
			t.oomFile, _ = os.Open(path)
		}
	})
	if t.oomFile == nil {
		return 0
	}
	var buf [512]byte
	n, err := t.oomFile.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return 0
	}
	return counter(buf[:n], "oom_kill")
}

// SetOwner makes the tree give each new child, its directory and files,
// to o (inside ids): the agent's own identity, so that no command, not
// even one run as uid 0, can change a child's limits or move processes.
func (t *Tree) SetOwner(o Owner) { t.owner = &o }

// chown gives dir and its files to the tree's owner. The kernel makes a
// new cgroup's directory and files all alike, owned by the fsuid and
// fsgid of whoever made it (unless root): when that was the owner, as
// when the agent makes a command's cgroup, the directory and its
// cgroup.procs already say so, and there is nothing to change.
func (t *Tree) chown(dir string) error {
	if t.owner == nil {
		return nil
	}
	if t.owned(dir) && t.owned(filepath.Join(dir, "cgroup.procs")) {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if err := os.Chown(dir, t.owner.UID, t.owner.GID); err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			if err := os.Lchown(filepath.Join(dir, e.Name()), t.owner.UID, t.owner.GID); err != nil {
				return err
			}
		}
	}
	return nil
}

// owned reports whether p is the tree owner's, uid and gid.
func (t *Tree) owned(p string) bool {
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil && int(st.Uid) == t.owner.UID && int(st.Gid) == t.owner.GID
}

// Child is the cgroup of one command.
type Child struct {
	t      *Tree
	name   string
	dirs   map[string]string // v1: the controllers it has a cgroup in; v2: ""
	limits Limits            // as asked
	oom0   uint64            // the sandbox's OOM kills when it was made

	releaseOnce sync.Once
}

// NewChild makes the cgroup of a new command with limits l (the command's,
// merged with the sandbox's). On v1 it always has a pids cgroup (to find
// and kill everything the command starts), and memory and cpu ones only
// when l differs from the sandbox's own. Finished children that still
// held processes are removed here once they are empty.
func (t *Tree) NewChild(l Limits) (_ *Child, err error) {
	t.reapLingering()
	c := &Child{t: t, name: "cmd-" + strconv.FormatUint(t.seq.Add(1), 10), dirs: map[string]string{}, limits: l, oom0: t.OOMKills()}
	defer func() {
		if err != nil {
			c.remove()
		}
	}()
	mk := func(ctrl string) (string, error) {
		d := filepath.Join(t.dirs[ctrl], c.name)
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", fmt.Errorf("create cgroup: %w", err)
		}
		c.dirs[ctrl] = d
		if err := t.chown(d); err != nil {
			return "", fmt.Errorf("own cgroup: %w", err)
		}
		return d, nil
	}
	write := func(dir, file, value string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
			return fmt.Errorf("set cgroup %s: %w", file, err)
		}
		return nil
	}
	memory := l.Memory > 0 && l.Memory != t.limits.Memory
	pids := l.PIDs > 0 && l.PIDs != t.limits.PIDs
	cpus := l.CPUs > 0 && l.CPUs != t.limits.CPUs
	if t.version == 1 {
		d, err := mk("pids")
		if err != nil {
			return nil, err
		}
		if pids {
			if err := write(d, "pids.max", strconv.FormatInt(l.PIDs, 10)); err != nil {
				return nil, err
			}
		}
		if memory && t.dirs["memory"] != "" {
			d, err := mk("memory")
			if err != nil {
				return nil, err
			}
			if _, err := os.Stat(filepath.Join(d, "memory.memsw.limit_in_bytes")); err == nil {
				// memsw must stay above the limit: set the limit first.
				if err := write(d, "memory.limit_in_bytes", strconv.FormatInt(l.Memory, 10)); err != nil {
					return nil, err
				}
				if err := write(d, "memory.memsw.limit_in_bytes", strconv.FormatInt(l.Memory, 10)); err != nil {
					return nil, err
				}
			} else if err := write(d, "memory.limit_in_bytes", strconv.FormatInt(l.Memory, 10)); err != nil {
				return nil, err
			}
		}
		if cpus && t.dirs["cpu"] != "" {
			d, err := mk("cpu")
			if err != nil {
				return nil, err
			}
			if err := write(d, "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)); err != nil {
				return nil, err
			}
			if err := write(d, "cpu.cfs_quota_us", strconv.FormatInt(quota(l.CPUs), 10)); err != nil {
				return nil, err
			}
		}
		return c, nil
	}
	d, err := mk("")
	if err != nil {
		return nil, err
	}
	if pids {
		if err := write(d, "pids.max", strconv.FormatInt(l.PIDs, 10)); err != nil {
			return nil, err
		}
	}
	if memory {
		if err := write(d, "memory.max", strconv.FormatInt(l.Memory, 10)); err != nil {
			return nil, err
		}
		_ = write(d, "memory.swap.max", "0") // absent without swap accounting
	}
	if cpus {
		if err := write(d, "cpu.max", fmt.Sprintf("%d %d", quota(l.CPUs), cpuPeriod)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Start starts cmd inside the child, so that its first instruction, and
// everything it forks, is accounted and limited there. onThread runs
// first on the thread that forks (the agent drops what a command could
// inherit from that thread).
func (c *Child) Start(cmd *exec.Cmd, onThread func() error) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if c.t.version == 1 {
		return c.startV1(cmd, onThread)
	}
	fd, err := unix.Open(c.dirs[""], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open cgroup: %w", err)
	}
	defer unix.Close(fd)
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = fd
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := onThread(); err != nil {
		return err
	}
	return cmd.Start()
}

// Signal sends sig to every process in the child and returns how many.
func (c *Child) Signal(sig syscall.Signal) int {
	d := c.dirs["pids"]
	if c.t.version == 2 {
		d = c.dirs[""]
	}
	if d == "" {
		return 0
	}
	return signalAll(d, true, sig)
}

// OOMKilled reports whether the kernel killed a process for exceeding a
// memory limit since the child was made: the child's own limit if it has
// one, else the sandbox's (then possibly a process of another command
// running at the same time).
func (c *Child) OOMKilled() bool {
	if d, ok := c.dirs["memory"]; ok {
		return readCounter(filepath.Join(d, "memory.oom_control"), "oom_kill") > 0
	}
	if d, ok := c.dirs[""]; ok && c.limits.Memory > 0 && c.limits.Memory != c.t.limits.Memory {
		return readCounter(filepath.Join(d, "memory.events"), "oom_kill") > 0
	}
	return c.t.OOMKills() > c.oom0
}

// PeakMemory returns the child's peak memory use in bytes, or 0 when the
// kernel does not tell (v1 without a memory cgroup of its own, v2 before
// Linux 5.19).
func (c *Child) PeakMemory() int64 {
	if d, ok := c.dirs["memory"]; ok {
		return readInt(filepath.Join(d, "memory.max_usage_in_bytes"))
	}
	if d, ok := c.dirs[""]; ok {
		return readInt(filepath.Join(d, "memory.peak"))
	}
	return 0
}

// Release removes the child once it is empty: now if it is, else later,
// when another child is made or Close is called.
func (c *Child) Release() {
	c.releaseOnce.Do(func() {
		if c.Signal(0) == 0 && c.remove() == nil {
			return
		}
		c.t.mu.Lock()
		c.t.lingering = append(c.t.lingering, c)
		c.t.mu.Unlock()
	})
}

func (c *Child) remove() error {
	var errs []error
	for _, d := range c.dirs {
		if err := syscall.Rmdir(d); err != nil && err != syscall.ENOENT {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reapLingering removes the lingering children that are now empty.
func (t *Tree) reapLingering() {
	t.mu.Lock()
	defer t.mu.Unlock()
	keep := t.lingering[:0]
	for _, c := range t.lingering {
		if c.Signal(0) > 0 || c.remove() != nil {
			keep = append(keep, c)
		}
	}
	clear(t.lingering[len(keep):])
	t.lingering = keep
}

// Close kills what the lingering children hold and removes them, and
// ends the launcher thread.
func (t *Tree) Close() {
	defer t.stopLauncher()
	if t.oomFile != nil {
		defer t.oomFile.Close()
	}
	t.mu.Lock()
	l := t.lingering
	t.lingering = nil
	t.mu.Unlock()
	for _, c := range l {
		deadline := time.Now().Add(5 * time.Second)
		for c.Signal(syscall.SIGKILL) > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		_ = c.remove()
	}
}
