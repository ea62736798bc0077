package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/execbox/execbox/runtimes/sandbox/internal/cgroups"
	"github.com/execbox/execbox/runtimes/sandbox/internal/seccomp"
	"golang.org/x/sys/unix"
)

// hostSystemPaths are the host directories (or their symlinks, on a
// merged /usr) that make a sandbox's root: programs and libraries, and
// /etc minus its secrets. Nothing else of the host is visible.
var hostSystemPaths = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc"}

// maskedEtc are files and directories of /etc hidden by an empty,
// unreadable one: password hashes, host keys, private keys and cluster
// credentials. Patterns are filepath.Match globs.
var maskedEtc = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/security/opasswd", "/etc/ssh/ssh_host_*_key", "/etc/ssl/private",
	"/etc/kubernetes", "/etc/docker", "/etc/containerd", "/etc/rancher",
	"/etc/sudoers", "/etc/sudoers.d", "/etc/machine-id",
}

// maskedProc are /proc entries hidden, and readOnlyProc the ones made
// read-only, as Docker does.
var (
	maskedProc   = []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/latency_stats", "/proc/acpi", "/proc/scsi", "/proc/asound"}
	readOnlyProc = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"}
)

// devices are the host device nodes bound into the sandbox's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// agentCaps are the capabilities the agent keeps: switching users, acting
// on the files and processes of those users, and (CAP_SETPCAP) dropping
// its bounding set in the shim that starts commands as root. Everything
// else, CAP_SYS_ADMIN first, is out of its bounding set, and none of
// these is usable outside the sandbox's user namespace.
var agentCaps = []int{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER,
	unix.CAP_KILL, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETPCAP, unix.CAP_SYS_PTRACE,
}

// runInit is the boundary's init, PID 1 of the sandbox's PID namespace,
// root of its user namespace. It runs from package init, on the main
// thread, which Go keeps locked to the main goroutine during package
// initialisation: the per-thread state it sets (cgroup namespace,
// bounding set, no_new_privs) is that of the thread that then forks the
// agent, which inherits it whole.
func runInit() int {
	status := os.NewFile(fdStatus, "status")
	fail := func(err error) int {
		fmt.Fprintf(status, "%v\n", err)
		status.Close()
		return 1
	}
	var cfg bootConfig
	if err := receiveConfig(&cfg); err != nil {
		return fail(fmt.Errorf("read config: %w", err))
	}
	if err := setupBoundary(&cfg); err != nil {
		return fail(err)
	}
	agent, err := startAgent(&cfg)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(status, "ok\n")
	status.Close()
	return reap(agent)
}

// receiveConfig reads, from fdConfig, the descriptors the host sends
// first (the agent's listener, then the workspace's mount if
// cfg.WorkspaceFD) and then the configuration.
func receiveConfig(cfg *bootConfig) (err error) {
	var fds []int
	defer func() {
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}()
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	var n, oobn, flags int
	for {
		n, oobn, flags, _, err = unix.Recvmsg(fdConfig, b[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		r, err := unix.ParseUnixRights(&m)
		if err != nil {
			return err
		}
		fds = append(fds, r...)
	}
	if n != 1 || flags&unix.MSG_CTRUNC != 0 {
		return errors.New("descriptors cut short")
	}
	cf := os.NewFile(fdConfig, "config")
	defer cf.Close()
	if err := json.NewDecoder(cf).Decode(cfg); err != nil {
		return err
	}
	want := 1
	if cfg.WorkspaceFD {
		want++
	}
	if cfg.RootFD {
		want++
	}
	if len(fds) != want {
		return fmt.Errorf("%d descriptors, want %d", len(fds), want)
	}
	cfg.listener = os.NewFile(uintptr(fds[0]), "listener")
	cfg.wsMount, cfg.rootMount = -1, -1
	next := 1
	if cfg.WorkspaceFD {
		cfg.wsMount = fds[next]
		next++
	}
	if cfg.RootFD {
		cfg.rootMount = fds[next]
	}
	return nil
}

// reap waits for every process of the namespace that ends up a child of
// PID 1 (orphans are reparented here, not to the agent) and exits with
// the agent's status when it ends: the kernel then kills everything left
// in the namespace.
//
// An agent that stops (SIGSTOP, SIGTSTP...) is resumed at once. Rootless
// with one uid mapped, commands run as the agent's uid and may signal
// it (kill -STOP -1 stops it, and every call to the sandbox would hang);
// no process inside can signal the init, PID 1, which has no handler
// for SIGSTOP or SIGKILL.
func reap(agent int) int {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WUNTRACED, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 1
		}
		if pid == agent && ws.Stopped() {
			_ = unix.Kill(agent, unix.SIGCONT)
			continue
		}
		if pid == agent {
			if ws.Exited() {
				return ws.ExitStatus()
			}
			return 128 + int(ws.Signal())
		}
	}
}

// setupBoundary builds the file system, network and host name of the
// boundary, and ends with its root being cfg.Root.
func setupBoundary(cfg *bootConfig) error {
	if err := cgroupNamespace(cfg); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	root := cfg.Root
	in := func(p string) string { return filepath.Join(root, p) }
	var maskFile, maskDir, src string
	var err error
	if cfg.RootFD {
		maskFile, maskDir, err = imageRoot(cfg, root)
		src = root
	} else if maskFile, maskDir, err = rootTmpfs(root); err == nil {
		src, err = bindSystem(cfg, in)
	}
	if err != nil {
		return err
	}
	if err := setupEtc(cfg, in, src, maskFile, maskDir); err != nil {
		return err
	}
	if err := mountWorkspace(cfg, in(Workspace)); err != nil {
		return err
	}
	if err := mountTmpfs(in("/tmp"), 0o1777, cfg.TmpSize, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return err
	}
	if err := setupProc(in, maskFile, maskDir); err != nil {
		return err
	}
	if err := setupDev(cfg, in); err != nil {
		return err
	}
	// More host paths, last, so that they may lie below /tmp or /dev.
	for _, p := range cfg.ReadOnly {
		if err := bindReadOnly(p, in(p), false); err != nil {
			return err
		}
	}
	if err := setupSys(cfg, in, maskDir); err != nil {
		return err
	}
	if err := finishRoot(in, maskFile, maskDir); err != nil {
		return err
	}
	if err := pivotRoot(root, !cfg.RootFD); err != nil {
		return err
	}

	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if cfg.Network == NetworkNone {
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	return nil
}

// rootTmpfs mounts the tmpfs the new root is built on, at root, and makes
// in it an empty unreadable file and directory, bound over what is
// masked (removed again by finishRoot).
func rootTmpfs(root string) (maskFile, maskDir string, err error) {
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755,size=16m"); err != nil {
		return "", "", fmt.Errorf("mount root tmpfs: %w", err)
	}
	maskFile, maskDir = filepath.Join(root, ".mask-file"), filepath.Join(root, ".mask-dir")
	if err := os.WriteFile(maskFile, nil, 0); err != nil {
		return "", "", err
	}
	if err := os.Mkdir(maskDir, 0); err != nil {
		return "", "", err
	}
	return maskFile, maskDir, nil
}

// bindSystem binds the system read-only into the new root: the host's
// directories (hostSystemPaths), or the entries of cfg.RootFS but those
// the sandbox gets its own of. It returns where they come from, "/" or
// cfg.RootFS.
func bindSystem(cfg *bootConfig, in func(string) string) (string, error) {
	src := "/"
	paths := hostSystemPaths
	if cfg.RootFS != "" {
		src = cfg.RootFS
		ents, err := os.ReadDir(src)
		if err != nil {
			return "", fmt.Errorf("rootfs: %w", err)
		}
		paths = nil
		for _, e := range ents {
			switch e.Name() {
			case "proc", "sys", "dev", "tmp", "run", "workspace", "root", "home":
				continue
			}
			paths = append(paths, "/"+e.Name())
		}
	}
	for _, p := range paths {
		if err := bindReadOnly(filepath.Join(src, p), in(p), true); err != nil {
			return "", err
		}
	}
	return src, nil
}

// setupEtc masks the secrets of the host's /etc (maskedEtc; an image's
// are its own) and writes the sandbox's users, groups and host name
// there (writeEtc, from src's /etc), if the system has an /etc.
func setupEtc(cfg *bootConfig, in func(string) string, src, maskFile, maskDir string) error {
	masked := maskedEtc
	if cfg.RootFD {
		masked = nil
	}
	if fi, err := os.Stat(in("/etc")); err == nil && fi.IsDir() {
		for _, pat := range masked {
			matches, _ := filepath.Glob(in(pat))
			for _, m := range matches {
				if err := mask(m, maskFile, maskDir); err != nil {
					return err
				}
			}
		}
		if err := writeEtc(cfg, in, filepath.Join(src, "etc")); err != nil {
			return err
		}
	}
	return nil
}

// mountWorkspace mounts the workspace at ws, read-write, nosuid and
// nodev: the host's detached mount (cfg.WorkspaceFD), a tmpfs with the
// quota of a rootless temporary workspace, or else a bind of its path,
// checked to be the directory the host checked.
func mountWorkspace(cfg *bootConfig, ws string) error {
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return err
	}
	switch {
	case cfg.WorkspaceFD:
		if err := unix.MoveMount(cfg.wsMount, "", unix.AT_FDCWD, ws, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("mount workspace: %w", err)
		}
		unix.Close(cfg.wsMount)
	case cfg.Bound.TmpfsSize > 0:
		data := fmt.Sprintf("mode=0755,size=%d,nr_inodes=%d", cfg.Bound.TmpfsSize, cfg.Bound.TmpfsInodes)
		if err := unix.Mount("execbox-workspace", ws, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
			return fmt.Errorf("workspace tmpfs: %w", err)
		}
	default:
		if err := unix.Mount(cfg.Workspace, ws, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("mount workspace: %w", err)
		}
		if err := checkBound(ws, cfg.Bound); err != nil {
			return err
		}
	}
	if err := setAttr(ws, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, 0, true); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	return nil
}

// setupProc mounts /proc of the new PID namespace, with the user
// namespace limit set to zero first: nothing inside can create a user
// namespace, whatever it calls (clone3 cannot be filtered by flag). The
// kernel's sensitive entries are masked (maskedProc) or made read-only
// (readOnlyProc).
func setupProc(in func(string) string, maskFile, maskDir string) error {
	if err := os.MkdirAll(in("/proc"), 0o555); err != nil {
		return err
	}
	procFlags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount("proc", in("/proc"), "proc", procFlags, "hidepid=invisible"); err != nil {
		if err := unix.Mount("proc", in("/proc"), "proc", procFlags, ""); err != nil {
			return fmt.Errorf("mount /proc: %w", err)
		}
	}
	if err := os.WriteFile(in("/proc/sys/user/max_user_namespaces"), []byte("0"), 0); err != nil {
		return fmt.Errorf("limit user namespaces: %w", err)
	}
	for _, p := range maskedProc {
		if _, err := os.Lstat(in(p)); err == nil {
			if err := mask(in(p), maskFile, maskDir); err != nil {
				return err
			}
		}
	}
	for _, p := range readOnlyProc {
		if _, err := os.Lstat(in(p)); err == nil {
			if err := bindReadOnly(in(p), in(p), false); err != nil {
				return err
			}
		}
	}
	return nil
}

// finishRoot makes empty home directories, so that programs looking for
// them find something, an empty /run and a /var/tmp, and removes the
// mask file and directory (what is bound over stays masked).
func finishRoot(in func(string) string, maskFile, maskDir string) error {
	for _, d := range []string{"/root", "/home", "/run", "/var/tmp"} {
		if err := os.MkdirAll(in(d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(in("/var/tmp"), 0o1777); err != nil {
		return err
	}
	if err := os.Remove(maskFile); err != nil {
		return err
	}
	return os.Remove(maskDir)
}

// pivotRoot switches to the new root, detaches the host's, and makes
// the new root's own mount nosuid, nodev and, if readOnly, read-only.
func pivotRoot(root string, readOnly bool) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if readOnly {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	if err := setAttr("/", attr, 0, false); err != nil {
		return fmt.Errorf("root read-only: %w", err)
	}
	return nil
}

// cgroupNamespace makes a cgroup namespace rooted at the sandbox's
// cgroup, and leaves the init in its "agent" child, out of the way of the
// commands' limits (on v2 also out of the top, which must be empty
// before the host enables its children's controllers). The namespace is
// made by the calling thread, the one that starts the agent, from the
// cgroup it is in: the top, where the host moved the init before sending
// the config; or, where the init started in "agent" (v1), this thread
// alone moves to the top for it and back, which costs no global lock in
// the kernel as moving the whole process does (cgroups.EnterSelf). No
// thread is cloned from this one meanwhile (locked, the runtime asks its
// template thread, made before, to do it), so every other thread of the
// init stays in "agent".
func cgroupNamespace(cfg *bootConfig) error {
	if !cfg.CgroupInAgent {
		if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
			return fmt.Errorf("unshare cgroup namespace: %w", err)
		}
		for _, dir := range cfg.CgroupDirs {
			if err := os.WriteFile(filepath.Join(dir, cgroups.AgentDir, "cgroup.procs"), []byte("0"), 0); err != nil {
				return fmt.Errorf("enter the agent's cgroup: %w", err)
			}
		}
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, dir := range cfg.CgroupDirs {
		if err := cgroups.EnterSelf(dir); err != nil {
			return fmt.Errorf("enter the sandbox's cgroup: %w", err)
		}
	}
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("unshare cgroup namespace: %w", err)
	}
	for _, dir := range cfg.CgroupDirs {
		if err := cgroups.EnterSelf(filepath.Join(dir, cgroups.AgentDir)); err != nil {
			return fmt.Errorf("enter the agent's cgroup: %w", err)
		}
	}
	return nil
}

// checkBound fails if the workspace bound at ws is not the directory the
// host checked (b, when it recorded one): something was swapped in at
// its path between the check and the bind.
func checkBound(ws string, b boundWorkspace) error {
	if b.Ino == 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Stat(ws, &st); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if st.Dev != b.Dev || st.Ino != b.Ino {
		return fmt.Errorf("workspace %s changed between its check and its mount", b.Dir)
	}
	return nil
}

// bindReadOnly binds src at dst (recursively with rec), read-only,
// nosuid and nodev. A missing src is skipped; a symlink is recreated as a
// symlink (a merged /usr's /bin -> usr/bin).
func bindReadOnly(src, dst string, rec bool) error {
	fi, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	if src != dst {
		if err := mkMountPoint(dst, fi.IsDir()); err != nil {
			return err
		}
	}
	flags := uintptr(unix.MS_BIND)
	if rec {
		flags |= unix.MS_REC
	}
	if err := unix.Mount(src, dst, "", flags, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if err := setAttr(dst, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, 0, rec); err != nil {
		return fmt.Errorf("read-only %s: %w", src, err)
	}
	return nil
}

// mkMountPoint creates an empty file or directory at p, with parents,
// unless something is there already.
func mkMountPoint(p string, dir bool) error {
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if dir {
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		return nil
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// mask hides p under the empty file or directory.
func mask(p, file, dir string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return nil // a dangling link hides nothing
	}
	src := file
	if fi.IsDir() {
		src = dir
	}
	if err := unix.Mount(src, p, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mask %s: %w", p, err)
	}
	return setAttr(p, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, 0, false)
}

// setAttr sets and clears mount attributes of the mount at p (and below
// with rec), without touching the others: a mount inherited from a more
// privileged namespace keeps its locked flags (atime, ro, nosuid, ...).
func setAttr(p string, set, clr uint64, rec bool) error {
	flags := uint(unix.AT_SYMLINK_NOFOLLOW)
	if rec {
		flags |= unix.AT_RECURSIVE
	}
	attr := unix.MountAttr{Attr_set: set, Attr_clr: clr}
	return unix.MountSetattr(unix.AT_FDCWD, p, flags, &attr)
}

// mountTmpfs mounts a tmpfs of size bytes at p.
func mountTmpfs(p string, mode os.FileMode, size int64, flags uintptr) error {
	if err := os.MkdirAll(p, 0o755); err != nil {
		return err
	}
	data := fmt.Sprintf("mode=%o,size=%d", mode, max(size, 4096))
	if err := unix.Mount("tmpfs", p, "tmpfs", flags, data); err != nil {
		return fmt.Errorf("mount tmpfs %s: %w", p, err)
	}
	return nil
}

// writeEtc gives the sandbox its own /etc/passwd and /etc/group (the
// host's plus the command user, so that whoami and friends work),
// /etc/hostname and /etc/hosts, bound read-only over the host's.
func writeEtc(cfg *bootConfig, in func(string) string, etc string) error {
	user := fmt.Sprintf("sandbox:x:%d:%d:execbox sandbox:%s:/bin/sh\n", cfg.UID, cfg.GID, Workspace)
	group := fmt.Sprintf("sandbox:x:%d:\n", cfg.GID)
	agentUser := fmt.Sprintf("execbox-agent:x:%d:%d:execbox agent:/:/usr/sbin/nologin\n", AgentID, AgentID)
	agentGroup := fmt.Sprintf("execbox-agent:x:%d:\n", AgentID)
	passwd := withLine(filepath.Join(etc, "passwd"), user, cfg.UID)
	grp := withLine(filepath.Join(etc, "group"), group, cfg.GID)
	files := map[string]string{
		"passwd":   withLineIn(passwd, agentUser, AgentID),
		"group":    withLineIn(grp, agentGroup, AgentID),
		"hostname": cfg.Hostname + "\n",
		"hosts":    "127.0.0.1\tlocalhost " + cfg.Hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	}
	for name, content := range files {
		// Created new, never through what is at the name: an image's
		// root may hold a symlink there, and until pivot_root the init
		// sees the host's tree.
		tmp := in(".etc-" + name)
		if err := os.RemoveAll(tmp); err != nil {
			return err
		}
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteString(content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		dst := in(filepath.Join("/etc", name))
		if _, err := os.Stat(dst); err != nil {
			continue // nowhere to bind it (a root file system without it)
		}
		if err := bindReadOnly(tmp, dst, false); err != nil {
			return err
		}
		if err := os.Remove(tmp); err != nil {
			return err
		}
	}
	return nil
}

// withLineIn returns s with line appended unless a line of s already has
// id as its third colon-separated field.
func withLineIn(s, line string, id int) string {
	want := strconv.Itoa(id)
	for l := range strings.SplitSeq(s, "\n") {
		if f := strings.Split(l, ":"); len(f) > 2 && f[2] == want {
			return s
		}
	}
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s + line
}

// withLine returns the file at path with line appended unless a line
// already has id as its third colon-separated field.
func withLine(path, line string, id uint32) string {
	b, _ := os.ReadFile(path)
	return withLineIn(string(b), line, int(id))
}

// setupDev builds a minimal /dev.
func setupDev(cfg *bootConfig, in func(string) string) error {
	dev := in("/dev")
	if err := mountTmpfs(dev, 0o755, 64<<10, unix.MS_NOSUID|unix.MS_NOEXEC); err != nil {
		return err
	}
	for _, d := range devices {
		host := "/dev/" + d
		if _, err := os.Stat(host); err != nil {
			continue
		}
		if err := mkMountPoint(filepath.Join(dev, d), false); err != nil {
			return err
		}
		if err := unix.Mount(host, filepath.Join(dev, d), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", host, err)
		}
		if err := setAttr(filepath.Join(dev, d), unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, 0, false); err != nil {
			return err
		}
	}
	pts := filepath.Join(dev, "pts")
	if err := os.Mkdir(pts, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount devpts: %w", err)
	}
	if err := mountTmpfs(filepath.Join(dev, "shm"), 0o1777, cfg.ShmSize, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
		return err
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return setAttr(dev, unix.MOUNT_ATTR_RDONLY, 0, false)
}

// setupSys mounts a read-only /sys and, below it, the sandbox's cgroup.
func setupSys(cfg *bootConfig, in func(string) string, maskDir string) error {
	sys := in("/sys")
	if err := os.MkdirAll(sys, 0o555); err != nil {
		return err
	}
	ro := uintptr(unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	// A sysfs of our own needs our own network namespace; with the host's
	// network, the host's sysfs is bound instead.
	if err := unix.Mount("sysfs", sys, "sysfs", ro, ""); err != nil {
		if err := bindReadOnly("/sys", sys, true); err != nil {
			return fmt.Errorf("mount /sys: %w", err)
		}
	}
	if _, err := os.Stat(filepath.Join(sys, "firmware")); err == nil {
		if err := unix.Mount(maskDir, filepath.Join(sys, "firmware"), "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	if cfg.CgroupVersion == 0 {
		return nil // no cgroup (rootless without a delegated subtree)
	}
	cg := filepath.Join(sys, "fs/cgroup")
	if _, err := os.Stat(cg); err != nil {
		return fmt.Errorf("no %s in sysfs: %w", cg, err)
	}
	if err := cgroupHandles(cfg); err != nil {
		return err
	}
	// What commands see of the cgroup is read-only (programs such as the
	// Go runtime and the JVM read their limits there); only the agent
	// writes, through its handles.
	attrs := uint64(unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC)
	if cfg.CgroupVersion == 2 {
		if err := unix.Mount(cfg.CgroupDirs[""], cg, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind cgroup: %w", err)
		}
		return setAttr(cg, attrs, 0, false)
	}
	if err := mountTmpfs(cg, 0o755, 64<<10, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
		return err
	}
	for ctrl, dir := range cfg.CgroupDirs {
		p := filepath.Join(cg, ctrl)
		if err := os.Mkdir(p, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(dir, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind cgroup %s: %w", ctrl, err)
		}
		if err := setAttr(p, attrs, 0, false); err != nil {
			return err
		}
	}
	return setAttr(cg, unix.MOUNT_ATTR_RDONLY, 0, false)
}

// cgroupHandles opens a detached mount of each of the sandbox's cgroup
// directories for the agent, in sorted controller order: it gets them at
// fdCgroup on, and the host gave it their paths (agentCgroupPaths,
// /proc/self/fd/N, which only the agent, non-dumpable, can follow).
func cgroupHandles(cfg *bootConfig) error {
	for _, ctrl := range slices.Sorted(maps.Keys(cfg.CgroupDirs)) {
		fd, err := unix.OpenTree(unix.AT_FDCWD, cfg.CgroupDirs[ctrl], unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("open_tree cgroup %s: %w", ctrl, err)
		}
		cfg.cgroupHandles = append(cfg.cgroupHandles, os.NewFile(uintptr(fd), "cgroup-"+ctrl))
	}
	return nil
}

// loopbackUp brings the network namespace's lo interface up.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// Securebits (linux/securebits.h): capabilities survive setuid (keep
// caps, no setuid fixup) and root gains nothing by exec (noroot), each
// locked so that no descendant can undo it.
const (
	secbitNoRoot              = 1 << 0
	secbitNoRootLocked        = 1 << 1
	secbitNoSetuidFixup       = 1 << 2
	secbitNoSetuidFixupLocked = 1 << 3
	secbitKeepCaps            = 1 << 4
	secbitKeepCapsLocked      = 1 << 5
)

// startAgent confines this thread as the agent must be, then starts the
// agent from it: the bounding set reduced to agentCaps, the agent's
// identity (AgentID, agentCaps kept as ambient capabilities so that they
// survive the exec of a non-root user), no core dumps (a hard
// RLIMIT_CORE of 0 that every command inherits), no_new_privs, the
// seccomp filter (synchronised to every thread of the init too).
// Afterwards the init keeps no capability at all.
func startAgent(cfg *bootConfig) (int, error) {
	keep := map[int]bool{}
	for _, c := range agentCaps {
		keep[c] = true
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if !keep[c] {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
				return 0, fmt.Errorf("drop capability %d: %w", c, err)
			}
		}
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return 0, fmt.Errorf("setrlimit(RLIMIT_CORE): %w", err)
	}
	if err := becomeAgentID(cfg.OneUID); err != nil {
		return 0, err
	}
	filter, err := seccomp.ParseFilter(cfg.Seccomp)
	if err != nil {
		return 0, err
	}
	if err := seccomp.SetNoNewPrivs(); err != nil {
		return 0, err
	}
	if err := seccomp.Install(filter, true); err != nil {
		return 0, err
	}
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{agentArg0},
		Env:        append(append([]string(nil), cfg.Env...), agentConfigEnv+"="+string(cfg.Agent)),
		Dir:        "/",
		Stdout:     os.Stderr,
		Stderr:     os.Stderr,
		ExtraFiles: append([]*os.File{nil, nil, cfg.listener}, cfg.cgroupHandles...), // cfg.listener at fdListener
		SysProcAttr: &syscall.SysProcAttr{
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start agent: %w", err)
	}
	for _, f := range cmd.ExtraFiles[2:] {
		f.Close() // the agent alone holds the listener and the cgroup handles
	}
	// Reaping needs no privilege.
	if err := capset(0); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}

// becomeAgentID switches the init, every thread of it, to AgentID. This
// thread, the one that starts the agent, keeps agentCaps (securebits)
// and raises them as ambient capabilities; the other threads lose every
// capability in the switch. A change of credentials clears the parent
// death signal and dumpability, so both are set again. With oneUID, where
// AgentID is not mapped, the init keeps its uid and only this thread's
// capabilities are reduced to agentCaps.
func becomeAgentID(oneUID bool) error {
	bits := secbitNoRoot | secbitNoRootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked | secbitKeepCaps | secbitKeepCapsLocked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_SECUREBITS): %w", err)
	}
	// The syscall package's wrappers act on every thread of the process.
	if !oneUID {
		if err := syscall.Setgroups([]int{}); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setresgid(AgentID, AgentID, AgentID); err != nil {
			return fmt.Errorf("setresgid: %w", err)
		}
		if err := syscall.Setresuid(AgentID, AgentID, AgentID); err != nil {
			return fmt.Errorf("setresuid: %w", err)
		}
	}
	var mask uint64
	for _, c := range agentCaps {
		mask |= 1 << c
	}
	if err := capset(mask); err != nil {
		return err
	}
	for _, c := range agentCaps {
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(c), 0, 0); err != nil {
			return fmt.Errorf("raise ambient capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	return nil
}

// capset sets the calling thread's permitted, effective and inheritable
// capabilities to mask.
func capset(mask uint64) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	for i := range data {
		v := uint32(mask >> (32 * i))
		data[i] = unix.CapUserData{Effective: v, Permitted: v, Inheritable: v}
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// runUserns is the helper whose only job is to own a user namespace
// while the host opens it (for an idmapped mount): it waits for its
// standard input to close.
func runUserns() int {
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}
