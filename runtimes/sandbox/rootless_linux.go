package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/owner"
	"github.com/execbox/execbox/internal/undo"
	"github.com/execbox/execbox/runtimes/sandbox/internal/cgroups"
	"github.com/execbox/execbox/runtimes/sandbox/internal/seccomp"
	"golang.org/x/sys/unix"
)

// Rootless mode: execbox run by an ordinary user (euid != 0).
//
// An unprivileged process may create a user namespace that maps one
// uid, its own. The sandbox's command user (Options.UID, 1000 by
// default) is that uid: files a command writes in the workspace belong
// to the user who ran execbox. The init gets every capability of its new
// user namespace as ambient capabilities (it is not root inside, the
// command user is mapped instead), which is what building the mounts
// needs, and the agent keeps the agent's set, as with root.
//
// With subordinate ids (a range of 65535 in /etc/subuid and /etc/subgid
// and the setuid helpers newuidmap and newgidmap), every other inside id
// maps to one of them (see subordinate): the init becomes AgentID as
// with root, and Spec.User works. Without, one uid is mapped.
//
// What differs from a sandbox made by root, and why:
//
//   - With one uid, the init, the agent and the commands share it, so a
//     command can signal the agent: a signal that ends it ends the
//     command's own sandbox (calls then fail, the sandbox lost, and
//     Close removes everything); one that stops it (SIGSTOP, SIGTSTP,
//     SIGTTIN, SIGTTOU) is undone at once by the init (reap), PID 1 of
//     the namespace, which no process inside can stop or kill, so calls
//     never hang on a stopped agent (TestAgentResumesAfterStop). A
//     command still cannot trace the agent or open its /proc entries
//     (seccomp, and the agent is non-dumpable). Spec.User and ExecRequest.User are unsupported.
//     Either way, sandboxes of one user share its uids (no range per
//     sandbox): only their namespaces separate them.
//   - No idmapped mounts (they need root on the host): a given
//     workspace is bound as it is, and its files appear as the command
//     user's when they are the user's on the host. A temporary
//     workspace with a quota is a tmpfs that the init mounts inside the
//     sandbox (the host never sees its files).
//   - cgroups only where a subtree is delegated to the user (a systemd
//     user session); elsewhere commands get the rlimits only, Health
//     says so, and memory, pids and cpu limits asked for are refused
//     with ErrUnsupported.

// rootlessStateDir is the default state directory of a user:
// $XDG_RUNTIME_DIR/execbox/sandbox (the user's own tmpfs, emptied at
// logout), else execbox-UID/sandbox in the temporary directory.
func rootlessStateDir() string { return owner.DefaultDir("sandbox") }

// rootlessIDMaps maps the inside uid and gid to the caller's own, the
// only mapping an unprivileged process may write.
func rootlessIDMaps(uid, gid uint32) (uids, gids []syscall.SysProcIDMap) {
	uids = []syscall.SysProcIDMap{{ContainerID: int(uid), HostID: os.Geteuid(), Size: 1}}
	gids = []syscall.SysProcIDMap{{ContainerID: int(gid), HostID: os.Getegid(), Size: 1}}
	return uids, gids
}

// allCaps lists every capability the running kernel knows, for the
// rootless init's ambient set (a capability the kernel does not know
// cannot be raised).
func allCaps() []uintptr {
	last := unix.CAP_LAST_CAP
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n < last {
			last = n
		}
	}
	caps := make([]uintptr, 0, last+1)
	for c := 0; c <= last; c++ {
		caps = append(caps, uintptr(c))
	}
	return caps
}

// usernsRestriction says why the kernel refuses an unprivileged user
// namespace and how to allow it, or "" when no known setting does.
func usernsRestriction() string {
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	switch {
	case read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
		return "the kernel forbids unprivileged user namespaces (kernel.unprivileged_userns_clone = 0); allow them with `sysctl -w kernel.unprivileged_userns_clone=1` (and in /etc/sysctl.d to keep it), or run execbox as root"
	case read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
		return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu 23.10 and later); give execbox an AppArmor profile with `userns,` (see apparmor.d(5)), or set the sysctl to 0, or run execbox as root"
	case read("/proc/sys/user/max_user_namespaces") == "0":
		return "user namespaces are disabled (user.max_user_namespaces = 0); raise it with `sysctl -w user.max_user_namespaces=15000`, or run execbox as root"
	}
	return ""
}

// probeRootlessNamespaces starts the helper in every namespace a
// rootless sandbox gets, with its one-uid mapping, or with sub's.
func probeRootlessNamespaces(network Network, uid, gid uint32, sub *subordinate) error {
	flags := syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP
	if network != NetworkHost {
		flags |= syscall.CLONE_NEWNET
	}
	cmd := execSelf(usernsArg0)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: uintptr(flags)}
	if sub == nil {
		cmd.SysProcAttr.UidMappings, cmd.SysProcAttr.GidMappings = rootlessIDMaps(uid, gid)
	}
	err := func() error {
		if sub == nil {
			return cmd.Run()
		}
		// The helper waits for its standard input to close.
		in, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		werr := sub.write(context.Background(), cmd.Process.Pid, uid, gid)
		in.Close()
		if err := cmd.Wait(); werr == nil {
			werr = err
		}
		return werr
	}()
	if err != nil {
		if why := usernsRestriction(); why != "" {
			return fmt.Errorf("rootless: %s (%v)", why, err)
		}
		return fmt.Errorf("rootless: cannot create user, mount, pid, ipc, uts, cgroup and network namespaces as uid %d: %v", os.Geteuid(), err)
	}
	return nil
}

// checkPrivateDir fails unless dir is a directory, not a symlink, owned
// by this process's euid, with none of the mode bits in others (0o077:
// nobody else may enter it; 0o022: nobody else may change what is in
// it): in a shared temporary directory another user could have made it
// first.
func checkPrivateDir(dir string, others uint32) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to uid %d", dir, st.Uid, os.Geteuid())
	}
	if st.Mode&others != 0 {
		return fmt.Errorf("%s has mode %o: others may enter or change it", dir, st.Mode&0o777)
	}
	return nil
}

// probeRootless is Runtime.probe for an ordinary user: namespaces with
// one uid mapped, and cgroups where a writable subtree is delegated.
func (r *Runtime) probeRootless(p *probe) {
	if !seccomp.Supported() {
		p.problems = append(p.problems, "no seccomp table for this architecture")
	}
	if err := r.st.init(); err != nil {
		p.problems = append(p.problems, fmt.Sprintf("state directory %s: %v", r.st.dir, err))
	} else {
		// The directory and the one execbox made it in (execbox-UID in a
		// shared temporary directory, or execbox in $XDG_RUNTIME_DIR):
		// whoever owns a parent may swap what is below it.
		for d, others := range map[string]uint32{r.st.dir: 0o077, filepath.Dir(r.st.dir): 0o022} {
			if err := checkPrivateDir(d, others); err != nil {
				p.problems = append(p.problems, fmt.Sprintf("state directory: %v", err))
				break
			}
		}
	}
	if sub, ok := findSubordinate(); ok {
		if err := probeRootlessNamespaces(r.opts.Network, *r.opts.UID, *r.opts.GID, sub); err != nil {
			r.log.Warn("subordinate ids do not work: one uid is mapped instead", "err", err)
		} else {
			p.sub = sub
		}
	}
	if p.sub == nil {
		if err := probeRootlessNamespaces(r.opts.Network, *r.opts.UID, *r.opts.GID, nil); err != nil {
			p.problems = append(p.problems, err.Error())
		}
	}
	cg := cgroups.Probe("execbox", r.opts.CgroupParent)
	if len(cg.Parents) == 0 || len(cg.Controllers) == 0 {
		p.noCgroups = "no cgroup subtree is delegated to uid " + strconv.Itoa(os.Geteuid())
		if len(cg.Problems) > 0 {
			p.noCgroups += " (" + strings.Join(cg.Problems, "; ") + ")"
		}
		cg = cgroups.Host{}
	}
	p.cg = cg
	for _, need := range []struct {
		ctrl, field string
		set         bool
	}{{"memory", "memory", r.explicit.Memory > 0}, {"pids", "pids", r.explicit.PIDs > 0}, {"cpu", "cpus", r.explicit.CPUs > 0}} {
		if need.set && !cg.Has(need.ctrl) {
			p.problems = append(p.problems, fmt.Sprintf("runtimes.sandbox.%s is set, but rootless execbox cannot enforce it without the %s cgroup controller delegated to it", need.field, need.ctrl))
		}
	}
}

// rootlessWorkspace makes the temporary workspace, or checks the given
// one, of a rootless sandbox: the init binds it by path (checking that it
// is still the same directory) or, for a temporary workspace with a
// quota, mounts a tmpfs there. Its undo steps go to u.
func (r *Runtime) rootlessWorkspace(id string, spec *execbox.Spec, rec *record, u *undo.Stack) (boundWorkspace, error) {
	var b boundWorkspace
	if spec.Workspace == "" {
		outer, err := os.MkdirTemp(r.opts.TempDir, "execbox-"+id+"-")
		if err != nil {
			return b, fmt.Errorf("create workspace: %w", err)
		}
		u.Add(func() { removeTempWorkspace(outer) })
		rec.TempWorkspace = outer
		if err := r.st.write(rec); err != nil {
			return b, err
		}
		b.Dir = filepath.Join(outer, tempWorkspaceDir)
		if err := os.Mkdir(b.Dir, 0o755); err != nil {
			return b, fmt.Errorf("create workspace: %w", err)
		}
		if size := int64(r.opts.WorkspaceSize); size > 0 {
			b.TmpfsSize, b.TmpfsInodes = size, r.opts.WorkspaceInodes
		}
		return b, b.identify()
	}
	// The check and the identity come from one descriptor, as with root.
	g, err := openGiven(spec)
	if err != nil {
		return b, err
	}
	unix.Close(g.fd)
	b.Dir, b.Dev, b.Ino = g.real, g.st.Dev, g.st.Ino
	return b, nil
}

// identify records the device and inode of b.Dir.
func (b *boundWorkspace) identify() error {
	var st unix.Stat_t
	if err := unix.Stat(b.Dir, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a directory", b.Dir)
	}
	b.Dev, b.Ino = st.Dev, st.Ino
	return nil
}

// subIDs is a range of subordinate ids of /etc/subuid or /etc/subgid.
type subIDs struct{ Start, Count uint32 }

// lookupSubIDs returns the first range of at least want ids that file
// (/etc/subuid or /etc/subgid: "name-or-id:start:count" lines) gives the
// user called name or with id id.
func lookupSubIDs(file, name string, id int, want uint32) (subIDs, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return subIDs{}, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) != 3 || f[0] != name && f[0] != strconv.Itoa(id) {
			continue
		}
		start, err1 := strconv.ParseUint(f[1], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 == nil && err2 == nil && count >= uint64(want) && start+count <= 1<<32-1 {
			return subIDs{uint32(start), uint32(count)}, true
		}
	}
	return subIDs{}, false
}

// subIDMap maps inside ids 0..maxInsideID: inside (the command user) to
// own, every other to the subordinate range, in order.
func subIDMap(inside, own uint32, sub subIDs) []syscall.SysProcIDMap {
	var m []syscall.SysProcIDMap
	if inside > 0 {
		m = append(m, syscall.SysProcIDMap{ContainerID: 0, HostID: int(sub.Start), Size: int(inside)})
	}
	m = append(m, syscall.SysProcIDMap{ContainerID: int(inside), HostID: int(own), Size: 1})
	if rest := maxInsideID - inside; rest > 0 {
		m = append(m, syscall.SysProcIDMap{ContainerID: int(inside) + 1, HostID: int(sub.Start + inside), Size: int(rest)})
	}
	return m
}

// subordinate is the id mapping of a rootless sandbox whose user has
// subordinate ids (/etc/subuid, /etc/subgid) and the setuid helpers
// newuidmap and newgidmap (Debian's uidmap package): the full range of
// inside ids, as with root, the command user being the caller.
type subordinate struct {
	uid, gid             subIDs
	newuidmap, newgidmap string
}

// findSubordinate returns the subordinate mapping of this user, if
// there is one.
func findSubordinate() (*subordinate, bool) {
	s := &subordinate{}
	var err error
	if s.newuidmap, err = exec.LookPath("newuidmap"); err != nil {
		return nil, false
	}
	if s.newgidmap, err = exec.LookPath("newgidmap"); err != nil {
		return nil, false
	}
	name, gname := "", ""
	if u, err := user.LookupId(strconv.Itoa(os.Geteuid())); err == nil {
		name = u.Username
	}
	if g, err := user.LookupGroupId(strconv.Itoa(os.Getegid())); err == nil {
		gname = g.Name
	}
	var ok1, ok2 bool
	s.uid, ok1 = lookupSubIDs("/etc/subuid", name, os.Geteuid(), maxInsideID)
	s.gid, ok2 = lookupSubIDs("/etc/subgid", gname, os.Getegid(), maxInsideID)
	if !ok1 || !ok2 {
		// newgidmap looks the group up by the user's name too.
		if !ok2 && name != "" {
			s.gid, ok2 = lookupSubIDs("/etc/subgid", name, os.Getegid(), maxInsideID)
		}
		if !ok1 || !ok2 {
			return nil, false
		}
	}
	return s, true
}

// write maps pid's user namespace with the helpers: inside uid:gid is
// the caller, every other inside id a subordinate one.
func (s *subordinate) write(ctx context.Context, pid int, uid, gid uint32) error {
	args := func(m []syscall.SysProcIDMap) []string {
		a := []string{strconv.Itoa(pid)}
		for _, r := range m {
			a = append(a, strconv.Itoa(r.ContainerID), strconv.Itoa(r.HostID), strconv.Itoa(r.Size))
		}
		return a
	}
	for _, c := range []struct {
		bin string
		m   []syscall.SysProcIDMap
	}{
		{s.newuidmap, subIDMap(uid, uint32(os.Geteuid()), s.uid)},
		{s.newgidmap, subIDMap(gid, uint32(os.Getegid()), s.gid)},
	} {
		if out, err := exec.CommandContext(ctx, c.bin, args(c.m)...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", c.bin, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// oneUID reports whether sandboxes map one uid: rootless without
// subordinate ids. It probes.
func (r *Runtime) oneUID() bool { return r.rootless && r.probe().sub == nil }
