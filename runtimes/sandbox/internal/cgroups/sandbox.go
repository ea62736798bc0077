//go:build linux

package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Host is what this machine's cgroups offer, as found by Probe.
type Host struct {
	// Version is 1 or 2, or 0 when no usable hierarchy was found.
	Version int
	// Layout says, in words, where on the hierarchy execbox found itself
	// and what it did about it (v2: the root of the mount, a delegated
	// subtree it moved into a leaf of, a configured parent).
	Layout string
	// Parents are the directories under which sandboxes' cgroups are
	// made: by controller on v1, under "" on v2.
	Parents map[string]string
	// Controllers lists the usable controllers among Controllers.
	Controllers []string
	// Problems says, in words, what is missing or not writable.
	Problems []string
}

// Has reports whether controller is usable.
func (h *Host) Has(controller string) bool {
	for _, c := range h.Controllers {
		if c == controller {
			return true
		}
	}
	return false
}

// mountpoint is where cgroupfs is mounted: the v1 hierarchies each have a
// directory below it; v2 is there itself.
const mountpoint = "/sys/fs/cgroup"

// Probe finds the cgroup hierarchy to use and where sandboxes go: below
// this process's own cgroup (on v1, in each controller's hierarchy) in a
// directory called group, or below parent when it is set (a path relative
// to the hierarchy's root). It creates that directory, to check that it
// can, and leaves it.
func Probe(group, parent string) Host {
	var h Host
	own, err := ownCgroups()
	if err != nil {
		h.Problems = append(h.Problems, fmt.Sprintf("cannot read /proc/self/cgroup: %v", err))
		return h
	}
	base := func(c string) string {
		if parent != "" {
			return filepath.Join("/", parent)
		}
		return filepath.Join(own[c], group)
	}
	h.Parents = map[string]string{}
	switch m := mode(); m {
	case legacy, hybrid:
		h.Version = 1
		h.Layout = "v1 hierarchies below " + mountpoint
		if m == hybrid {
			h.Layout = "hybrid: v1 hierarchies below " + mountpoint
		}
		for _, c := range Controllers {
			root := filepath.Join(mountpoint, c)
			if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
				h.Problems = append(h.Problems, fmt.Sprintf("cgroup v1 controller %s is not mounted at %s", c, root))
				continue
			}
			dir := filepath.Join(root, base(c))
			if err := mkdirWritable(dir); err != nil {
				h.Problems = append(h.Problems, fmt.Sprintf("cannot create cgroup %s: %v", dir, err))
				continue
			}
			h.Parents[c] = dir
			h.Controllers = append(h.Controllers, c)
		}
	case unified:
		h.Version = 2
		probe2(&h, own[""], group, parent)
	default:
		h.Problems = append(h.Problems, "no cgroup hierarchy is mounted at "+mountpoint)
	}
	return h
}

// The modes of the cgroup file systems at mountpoint.
const (
	unavailable = iota
	legacy      // v1 hierarchies only
	hybrid      // v1 hierarchies, and cgroup2 at mountpoint/unified
	unified     // cgroup2 at mountpoint
)

// mode tells how cgroups are mounted at mountpoint: cgroup2 there, or
// else (a tmpfs of v1 hierarchies) legacy or, with a cgroup2 at
// mountpoint/unified, hybrid. (As github.com/containerd/cgroups/v3's
// Mode does.)
func mode() int {
	var st unix.Statfs_t
	if err := unix.Statfs(mountpoint, &st); err != nil {
		return unavailable
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return unified
	}
	if err := unix.Statfs(filepath.Join(mountpoint, "unified"), &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return hybrid
	}
	return legacy
}

// mkdirWritable creates dir and its parents unless they exist, and
// checks that this process may create cgroups in it: one made earlier by
// root is no use to an ordinary user.
func mkdirWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return fmt.Errorf("it exists, but not writable by uid %d (%w)", os.Geteuid(), err)
	}
	return nil
}

// selfLeaf is the leaf cgroup into which Probe moves execbox itself when
// it runs in a delegated v2 subtree: v2 lets a cgroup hold processes or
// give controllers to children, not both.
const selfLeaf = "execbox-self"

// probe2 finds where sandboxes go on a v2 hierarchy: below parent when it
// is set (a cgroup delegated to execbox, with the controllers enabled by
// whoever delegated it), else below this process's own cgroup, which is
// either the root of the mount (a host, a VM) or a subtree it was given
// (systemd Delegate=yes, a user session, a container's cgroup
// namespace). In a subtree, execbox first moves itself into a leaf of it
// so that the subtree may enable controllers for its children. Nothing
// above the starting cgroup is ever written.
func probe2(h *Host, own, group, parent string) {
	start := filepath.Join(mountpoint, own)
	if filepath.Base(own) == selfLeaf {
		// An earlier Probe of this process moved it into the leaf: the
		// subtree it was given is the leaf's parent.
		start = filepath.Dir(start)
	}
	if parent != "" {
		start = filepath.Join(mountpoint, parent)
	}
	b, err := os.ReadFile(filepath.Join(start, "cgroup.controllers"))
	if err != nil {
		h.Problems = append(h.Problems, fmt.Sprintf("cgroup v2: %v", err))
		return
	}
	avail := strings.Fields(string(b))
	var want []string
	for _, c := range Controllers {
		if !contains(avail, c) {
			h.Problems = append(h.Problems, fmt.Sprintf("cgroup v2 controller %s is not delegated to %s", c, start))
			continue
		}
		want = append(want, c)
	}
	// The true root has no cgroup.type and may hold processes and
	// enable controllers at once; any other cgroup may not.
	_, err = os.Stat(filepath.Join(start, "cgroup.type"))
	root := errors.Is(err, os.ErrNotExist)
	switch {
	case parent != "":
		h.Layout = "configured parent " + start
	case root:
		h.Layout = "root of the cgroup2 mount"
	default:
		h.Layout = "delegated subtree " + start
		if err := enterLeaf(start); err != nil {
			h.Problems = append(h.Problems, fmt.Sprintf("cgroup v2: delegated subtree %s: %v", start, err))
			return
		}
		h.Layout += " (execbox moved into " + selfLeaf + ")"
	}
	if nsdelegate() {
		h.Layout += ", nsdelegate"
	}
	dir := filepath.Join(start, group)
	if err := mkdirWritable(dir); err != nil {
		h.Problems = append(h.Problems, fmt.Sprintf("cannot create cgroup %s: %v", dir, err))
		return
	}
	for _, d := range []string{start, dir} {
		if err := (&cgroup2Path{dir: d}).enableHere(want); err != nil {
			h.Problems = append(h.Problems, fmt.Sprintf("cannot enable controllers %v in %s: %v (does it hold processes other than execbox?)", want, d, err))
			return
		}
	}
	h.Parents[""] = dir
	h.Controllers = want
}

// enterLeaf empties dir into its leaf selfLeaf: this process and any
// other process in dir itself, which are those of execbox's own service,
// session or container (the one the subtree was delegated to; a shell
// that started execbox, say), since dir may not give controllers to
// children while it holds processes.
func enterLeaf(dir string) error {
	leaf := filepath.Join(dir, selfLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	procs := filepath.Join(leaf, "cgroup.procs")
	if err := os.WriteFile(procs, []byte("0"), 0); err != nil {
		return err
	}
	for _, pid := range readPIDs(dir, false) {
		// A process may exit meanwhile (ESRCH): nothing to move.
		if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("move process %d into %s: %w", pid, leaf, err)
		}
	}
	return nil
}

// nsdelegate reports whether the cgroup2 mount has the nsdelegate option,
// under which a move between cgroups must stay inside the mover's cgroup
// namespace.
func nsdelegate() bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == mountpoint && strings.Contains(line, " - cgroup2 ") {
			return strings.Contains(line, "nsdelegate")
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cgroup2Path enables controllers for a v2 directory's children.
type cgroup2Path struct{ dir string }

// enableHere writes +controller to p.dir's own subtree_control.
func (p *cgroup2Path) enableHere(controllers []string) error {
	var add []string
	for _, c := range controllers {
		add = append(add, "+"+c)
	}
	return os.WriteFile(filepath.Join(p.dir, "cgroup.subtree_control"), []byte(strings.Join(add, " ")), 0)
}

// Owner is the host user and group to which a sandbox's cgroup is
// delegated: the boundary's root.
type Owner struct{ UID, GID int }

// Sandbox is the cgroup of one sandbox on the host. It has two children:
// "cmds", which holds every command and carries the sandbox's limits, and
// "agent", where the boundary's init and agent live, outside those
// limits, so that a command exhausting the sandbox's memory or PIDs gets
// itself killed, never the agent that reports it.
type Sandbox struct {
	version int
	// dirs are the cgroup's directories: by controller (v1) or "" (v2).
	dirs map[string]string
	// controllers and limits are what Seal enables and sets (v2), and
	// Finish makes (v1), with owner and memsw (v1: swap is accounted).
	controllers []string
	limits      Limits
	owner       Owner
	memsw       bool
	name        string
}

// Limits of the "agent" cgroup, where the boundary's init and agent live:
// they bound what a command could make the agent spend on its behalf
// (buffers, sessions, threads) without ever getting in the way of the
// commands' own limits, which are on "cmds".
const (
	AgentMemory = 256 << 20
	AgentPIDs   = 1024
)

// Names of a sandbox cgroup's children.
const (
	CmdsDir  = "cmds"
	AgentDir = "agent"
)

// Create makes the cgroup name below h's parents, its "cmds" child with
// limits l and its "agent" child (with AgentMemory and AgentPIDs), and
// delegates them to owner, the agent's identity, which no command may
// have: the owner may create cgroups below "cmds" and move processes
// between the three, but not change the limits of "cmds" or "agent". On
// v2 the limits are written by Seal. On failure nothing is left. With no
// hierarchy (h.Version 0: rootless, nothing delegated) the Sandbox has
// no directory and its methods do nothing. A negative owner keeps the
// caller as the owner. It is Begin and Finish in one.
func Create(h Host, name string, l Limits, owner Owner) (*Sandbox, error) {
	s, err := Begin(h, name, l, owner)
	if err != nil {
		return nil, err
	}
	if err := s.Finish(); err != nil {
		_ = s.Destroy(time.Now().Add(2 * time.Second))
		return nil, err
	}
	return s, nil
}

// DirsOf returns the directories Begin(h, name, ...) makes (see Dirs),
// before it makes them: for a record that must come first.
func DirsOf(h Host, name string) map[string]string {
	dirs := map[string]string{}
	switch h.Version {
	case 1:
		for _, c := range h.Controllers {
			dirs[c] = filepath.Join(h.Parents[c], name)
		}
	case 2:
		dirs[""] = filepath.Join(h.Parents[""], name)
	}
	return dirs
}

// Begin makes the part of Create that a process started in the
// sandbox's "agent" (EnterAgent) needs first: on v1, the sandbox's
// cgroup and its "agent" child with their limits, in every hierarchy;
// on v2, everything (the init starts at the top there, and the limits
// wait for Seal). Finish makes the rest: on v1, "cmds" with limits l and
// the delegation of all three to owner, which must be done before the
// process started there reads or writes any of it. On failure nothing is
// left.
func Begin(h Host, name string, l Limits, owner Owner) (_ *Sandbox, err error) {
	if h.Version == 0 {
		return &Sandbox{dirs: map[string]string{}}, nil
	}
	s := &Sandbox{version: h.Version, dirs: map[string]string{}, limits: l, owner: owner, name: name}
	defer func() {
		if err != nil {
			_ = s.Destroy(time.Now().Add(2 * time.Second))
		}
	}()
	switch h.Version {
	case 1:
		s.controllers = h.Controllers
		if _, err := os.Stat(filepath.Join(h.Parents["memory"], "memory.memsw.limit_in_bytes")); err == nil {
			s.memsw = true
		}
		top := topLimits(l)
		for _, c := range h.Controllers {
			dir := filepath.Join(h.Parents[c], name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
			}
			s.dirs[c] = dir
			if err := os.Mkdir(filepath.Join(dir, AgentDir), 0o755); err != nil {
				return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
			}
			if a, ok := agentLimits[c]; ok {
				if err := os.WriteFile(filepath.Join(dir, AgentDir, a[0]), []byte(a[1]), 0); err != nil {
					return nil, fmt.Errorf("create cgroup %s: agent limit: %w", name, err)
				}
			}
			if v, ok := top[c]; ok {
				// The same limit file as the agent's, on the sandbox's own cgroup.
				if err := os.WriteFile(filepath.Join(dir, agentLimits[c][0]), []byte(v), 0); err != nil {
					return nil, fmt.Errorf("create cgroup %s: limit: %w", name, err)
				}
			}
		}
	case 2:
		// Directories only: the controllers of the sandbox's children
		// can be enabled only once the init, which must make its cgroup
		// namespace at the sandbox's top, has left it for "agent"
		// (no internal processes); Seal does that and sets the limits.
		dir := filepath.Join(h.Parents[""], name)
		for _, d := range []string{dir, filepath.Join(dir, AgentDir), filepath.Join(dir, CmdsDir)} {
			if err := os.Mkdir(d, 0o755); err != nil {
				return nil, fmt.Errorf("create cgroup %s: %w", d, err)
			}
			s.dirs[""] = dir
		}
		s.controllers = h.Controllers
		// Not cgroup.subtree_control: Seal enables what the commands'
		// cgroups need, and nothing inside turns a controller off.
		for _, d := range []string{"", AgentDir, CmdsDir} {
			if err := delegate(filepath.Join(dir, d), owner, "cgroup.procs", "cgroup.threads"); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// agentLimits are the limits of "agent" on v1 (file, value), by
// controller; the sandbox's own cgroup has the same files (topLimits).
var agentLimits = map[string][2]string{
	"memory": {"memory.limit_in_bytes", strconv.Itoa(AgentMemory)},
	"pids":   {"pids.max", strconv.Itoa(AgentPIDs)},
}

// Finish makes what Begin left (v1): "cmds", with the sandbox's limits,
// and the delegation of the cgroup, "agent" and "cmds" to the owner. On
// failure the caller destroys the Sandbox.
func (s *Sandbox) Finish() error {
	if s.version != 1 {
		return nil
	}
	// The limits of "cmds", by controller, in the order written
	// (memory.memsw.limit_in_bytes, which keeps swap from extending
	// the memory limit, must not go below memory.limit_in_bytes).
	type setting struct{ file, value string }
	limits := map[string][]setting{}
	l := s.limits
	if l.Memory > 0 {
		v := strconv.FormatInt(l.Memory, 10)
		limits["memory"] = []setting{{"memory.limit_in_bytes", v}}
		if s.memsw {
			limits["memory"] = append(limits["memory"], setting{"memory.memsw.limit_in_bytes", v})
		}
	}
	if l.PIDs > 0 {
		limits["pids"] = []setting{{"pids.max", strconv.FormatInt(l.PIDs, 10)}}
	}
	if l.CPUs > 0 {
		limits["cpu"] = []setting{{"cpu.cfs_period_us", strconv.Itoa(cpuPeriod)}, {"cpu.cfs_quota_us", strconv.FormatInt(quota(l.CPUs), 10)}}
	}
	for _, c := range s.controllers {
		dir := s.dirs[c]
		if err := os.Mkdir(filepath.Join(dir, CmdsDir), 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		for _, st := range limits[c] {
			if err := os.WriteFile(filepath.Join(dir, CmdsDir, st.file), []byte(st.value), 0); err != nil {
				return fmt.Errorf("create cgroup %s: %s: %w", s.name, st.file, err)
			}
		}
		for _, d := range []string{"", AgentDir, CmdsDir} {
			if err := delegate(filepath.Join(dir, d), s.owner, "cgroup.procs", "tasks"); err != nil {
				return err
			}
		}
	}
	return nil
}

// delegate gives dir and its files named files to owner.
func delegate(dir string, owner Owner, files ...string) error {
	if err := os.Chown(dir, owner.UID, owner.GID); err != nil {
		return fmt.Errorf("delegate cgroup %s: %w", dir, err)
	}
	for _, f := range files {
		if err := os.Chown(filepath.Join(dir, f), owner.UID, owner.GID); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("delegate cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// Version is 1 or 2.
func (s *Sandbox) Version() int { return s.version }

// Dirs returns the cgroup's directories: by controller on v1, under "" on
// v2. The caller must not change the map.
func (s *Sandbox) Dirs() map[string]string { return s.dirs }

// AddInit moves the boundary's init, pid, into the top of the sandbox's
// cgroup, where the init makes its cgroup namespace (so that the
// namespace holds "agent" and "cmds" both, as nsdelegate requires of a
// move between them) before it moves itself into "agent". (Where
// EnterAgent placed the init, it is in "agent" already.)
func (s *Sandbox) AddInit(pid int) error {
	for _, c := range sortedKeys(s.dirs) {
		dir := s.dirs[c]
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("add process %d to cgroup %s: %w", pid, dir, err)
		}
	}
	return nil
}

// EnterAgent moves the calling thread, which the caller has locked to its
// goroutine, into the sandbox's "agent" cgroups, so that a process it
// then forks (the boundary's init) starts there, in every controller,
// before its first instruction; leave moves the thread back. That is v1
// only (v1 places threads, and the thread moves only itself): a move of a
// whole process (cgroup.procs), or of a task named by its id, takes the
// kernel's global threadgroup lock for writing, which waits out an RCU
// grace period, milliseconds or tens of them, where a thread moving
// itself ("0" in tasks) does not. ok is false where this is not done
// (v2, no cgroup, or a caller who could not move back): AddInit then
// places the process once it started. With ok and an error, some moves
// may have been made: the caller must still call leave. If leave fails,
// the thread is left in the sandbox's cgroup, and must not go on running
// anything (let it exit, locked, with its goroutine) nor stay there:
// Destroy would kill the process it belongs to.
func (s *Sandbox) EnterAgent() (leave func() error, ok bool, err error) {
	if s.version != 1 {
		return nil, false, nil
	}
	own, err := parseCgroups("/proc/thread-self/cgroup")
	if err != nil {
		return nil, false, nil
	}
	ctrls := sortedKeys(s.dirs)
	back := map[string]string{}
	for _, c := range ctrls {
		p, found := own[c]
		d := filepath.Join(mountpoint, c, p)
		if !found || unix.Access(filepath.Join(d, "tasks"), unix.W_OK) != nil {
			return nil, false, nil
		}
		back[c] = d
	}
	var moved []string
	leave = func() error {
		var errs []error
		for _, c := range moved {
			if err := enterSelf(back[c]); err != nil {
				errs = append(errs, fmt.Errorf("leave cgroup: %w", err))
			}
		}
		return errors.Join(errs...)
	}
	for _, c := range ctrls {
		if err := enterSelf(filepath.Join(s.dirs[c], AgentDir)); err != nil {
			return leave, true, fmt.Errorf("enter cgroup: %w", err)
		}
		moved = append(moved, c)
	}
	return leave, true, nil
}

// EnterSelf moves the calling thread, on v1, into the cgroup dir (of any
// hierarchy): "0" in its tasks file, the thread itself, the one move that
// takes no global lock (see Sandbox.EnterAgent).
func EnterSelf(dir string) error { return enterSelf(dir) }

func enterSelf(dir string) error {
	return os.WriteFile(filepath.Join(dir, "tasks"), []byte("0"), 0)
}

// Seal finishes a v2 cgroup once the init has moved into "agent": it
// enables the controllers for the sandbox's children, sets the limits of
// "cmds" and "agent", and enables the controllers below "cmds" for the
// commands' own cgroups. The limit files stay the host's: nothing inside
// can write them. On v1, where Create did all this, it does nothing.
func (s *Sandbox) Seal() error {
	if s.version != 2 {
		return nil
	}
	dir := s.dirs[""]
	var add []string
	for _, c := range s.controllers {
		add = append(add, "+"+c)
	}
	write := func(d, file, value string) error {
		if err := os.WriteFile(filepath.Join(dir, d, file), []byte(value), 0); err != nil {
			return fmt.Errorf("cgroup %s: %w", filepath.Join(dir, d), err)
		}
		return nil
	}
	if err := write("", "cgroup.subtree_control", strings.Join(add, " ")); err != nil {
		return err
	}
	has := func(c string) bool { return contains(s.controllers, c) }
	l := s.limits
	top := topLimits(l)
	steps := []struct {
		ok           bool
		d, file, val string
		optional     bool
	}{
		{has("memory") && top["memory"] != "", "", "memory.max", top["memory"], false},
		{has("pids") && top["pids"] != "", "", "pids.max", top["pids"], false},
		{has("memory"), AgentDir, "memory.max", strconv.Itoa(AgentMemory), false},
		{has("memory"), AgentDir, "memory.swap.max", "0", true},
		{has("pids"), AgentDir, "pids.max", strconv.Itoa(AgentPIDs), false},
		{has("memory") && l.Memory > 0, CmdsDir, "memory.max", strconv.FormatInt(l.Memory, 10), false},
		{has("memory") && l.Memory > 0, CmdsDir, "memory.swap.max", "0", true}, // absent without swap accounting
		{has("pids") && l.PIDs > 0, CmdsDir, "pids.max", strconv.FormatInt(l.PIDs, 10), false},
		{has("cpu") && l.CPUs > 0, CmdsDir, "cpu.max", fmt.Sprintf("%d %d", quota(l.CPUs), cpuPeriod), false},
		{true, CmdsDir, "cgroup.subtree_control", strings.Join(add, " "), false},
	}
	for _, st := range steps {
		if !st.ok {
			continue
		}
		if err := write(st.d, st.file, st.val); err != nil && !(st.optional && errors.Is(err, os.ErrNotExist)) {
			return err
		}
	}
	return nil
}

// topLimits are the limits of a sandbox's cgroup itself, by controller:
// its commands' and its agent's together. The children's limits are what
// bounds them; these bound whatever holds the cgroup's delegation (the
// agent's uid) if it made a cgroup of its own beside "cmds" and "agent".
func topLimits(l Limits) map[string]string {
	top := map[string]string{}
	if l.Memory > 0 {
		top["memory"] = strconv.FormatInt(l.Memory+AgentMemory, 10)
	}
	if l.PIDs > 0 {
		top["pids"] = strconv.FormatInt(l.PIDs+AgentPIDs, 10)
	}
	return top
}

// Destroy kills every process left in the cgroup and its children and
// removes them all. It is idempotent.
func (s *Sandbox) Destroy(deadline time.Time) error {
	return Remove(s.dirs, deadline)
}

// Remove kills every process in the cgroup directories dirs (as recorded
// from Dirs, possibly by another process) and below, and removes them.
func Remove(dirs map[string]string, deadline time.Time) error {
	var errs []error
	killed := false
	for _, c := range sortedKeys(dirs) {
		d := dirs[c]
		if !isCgroupDir(d) {
			errs = append(errs, fmt.Errorf("cgroups: %s is not a cgroup directory", d))
			continue
		}
		if !killed && (c == "pids" || c == "") {
			// The pids (or unified) hierarchy sees every process.
			if !killAll(d, deadline) {
				errs = append(errs, fmt.Errorf("cgroup %s: processes survived SIGKILL", d))
			}
			killed = true
		}
	}
	for _, c := range sortedKeys(dirs) {
		if d := dirs[c]; isCgroupDir(d) {
			if !killed && !killAll(d, deadline) {
				errs = append(errs, fmt.Errorf("cgroup %s: processes survived SIGKILL", d))
			}
			if err := removeTree(d, deadline); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// isCgroupDir guards Remove against a corrupt record: only directories on
// a cgroup file system below the mount point are touched. A missing one
// counts (it is already removed).
func isCgroupDir(d string) bool {
	if !strings.HasPrefix(d, mountpoint+"/") || strings.Contains(d, "/../") {
		return false
	}
	var st syscallStatfs
	if err := statfs(d, &st); err != nil {
		return os.IsNotExist(err)
	}
	return st.Type == cgroupSuperMagic || st.Type == cgroup2SuperMagic
}
