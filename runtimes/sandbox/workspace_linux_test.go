//go:build linux

package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
	"golang.org/x/sys/unix"
)

// tempWorkspace returns the host directory of sb's temporary workspace
// (the root-only outer directory) and the workspace in it.
func tempWorkspace(t *testing.T, sb execbox.Sandbox) (outer, ws string) {
	t.Helper()
	l := sandbox.Leftovers(sb.(*sandbox.Sandbox))
	outer = l[len(l)-1]
	return outer, filepath.Join(outer, "ws")
}

func mustExec(t *testing.T, sb execbox.Sandbox, req execbox.ExecRequest) execbox.Result {
	t.Helper()
	if req.Timeout == 0 {
		req.Timeout = 20 * time.Second
	}
	res, err := sb.Exec(t.Context(), req)
	if err != nil {
		t.Fatalf("Exec %q: %v", req.Shell, err)
	}
	return res
}

// TestTempWorkspaceUnprivileged: what a sandbox writes in a temporary
// workspace carries no privilege on the host: it is owned by the
// sandbox's unprivileged uid range, never by host root, inside a
// directory only root can enter; a file made setuid by inside root is
// not a root-owned setuid file; no device node appears.
func TestTempWorkspaceUnprivileged(t *testing.T) {
	testutil.Require(t, testutil.Root) // workspace owners of a uid range
	rt := requireSandbox(t, sandbox.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	outer, ws := tempWorkspace(t, sb)

	var st unix.Stat_t
	if err := unix.Stat(outer, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 || st.Mode&0o777 != 0o700 {
		t.Errorf("%s: owner %d mode %o, want root's 0700", outer, st.Uid, st.Mode&0o777)
	}
	if err := unix.Stat(ws, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid < sandbox.DefaultUIDBase {
		t.Errorf("workspace %s owned by host uid %d, want one of the sandbox's range", ws, st.Uid)
	}

	root := &execbox.User{UID: 0, GID: 0}
	user := &execbox.User{UID: 1000, GID: 1000}
	mustExec(t, sb, execbox.ExecRequest{Shell: "echo x > by-user; mkdir dir-user"})
	// Inside root: its writes are refused or land as an unprivileged uid.
	mustExec(t, sb, execbox.ExecRequest{User: root, Shell: "echo x > by-root; cp /bin/sh suid-root; chmod 6755 suid-root; chown 0:0 suid-root"})
	mustExec(t, sb, execbox.ExecRequest{User: user, Shell: "cp /bin/sh suid-user; chmod 6755 suid-user"})
	for _, who := range []*execbox.User{root, user} {
		mustExec(t, sb, execbox.ExecRequest{User: who, Shell: "mknod null-" + itoa(int(who.UID)) + " c 1 3; mknod sda-" + itoa(int(who.UID)) + " b 8 0; mknod wh-" + itoa(int(who.UID)) + " c 0 0"})
	}

	err = filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if st.Uid < sandbox.DefaultUIDBase || st.Gid < sandbox.DefaultUIDBase {
			t.Errorf("%s is owned by host %d:%d, want the sandbox's unprivileged range", p, st.Uid, st.Gid)
		}
		if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 && (st.Uid == 0 || st.Gid == 0) {
			t.Errorf("%s is a setuid/setgid file of host root", p)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFBLK:
			t.Errorf("%s is a block device on the host", p)
		case unix.S_IFCHR:
			if st.Rdev != 0 {
				t.Errorf("%s is a character device %d:%d on the host", p, unix.Major(st.Rdev), unix.Minor(st.Rdev))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "by-user")); err != nil {
		t.Errorf("the command user's file is missing: %v", err)
	}
}

// TestWorkspaceQuota: a temporary workspace has a disk quota in bytes
// and inodes; writing past it is ENOSPC for the command, whose result
// still comes back, and Close leaves no mount.
func TestWorkspaceQuota(t *testing.T) {
	// On by default: a temporary workspace of a runtime configured with
	// nothing is a tmpfs of DefaultWorkspaceSize bytes and
	// DefaultWorkspaceInodes inodes.
	def, err := requireSandbox(t, sandbox.Options{}).Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	// Seen from inside: rootless, the tmpfs is the init's, not the host's.
	got := mustExec(t, def, execbox.ExecRequest{Shell: "stat -f -c '%T %b %S %c' " + sandbox.Workspace}).Stdout.Text()
	if want := fmt.Sprintf("tmpfs %d 4096 %d\n", sandbox.DefaultWorkspaceSize/4096, sandbox.DefaultWorkspaceInodes); got != want {
		t.Errorf("default temporary workspace: type, blocks, block size, inodes %q; want %q", got, want)
	}

	rt := requireSandbox(t, sandbox.Options{WorkspaceSize: 1 << 20, WorkspaceInodes: 64})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	_, ws := tempWorkspace(t, sb)
	res := mustExec(t, sb, execbox.ExecRequest{Shell: "head -c 4194304 /dev/zero > big"})
	if res.Success() || !strings.Contains(res.Stderr.Text(), "No space left") {
		t.Errorf("writing 4MiB in a 1MiB workspace: %s, stderr %q; want ENOSPC", res.String(), res.Stderr.Text())
	}
	res = mustExec(t, sb, execbox.ExecRequest{Shell: "rm -f big; i=0; while [ $i -lt 200 ]; do touch f$i || exit 3; i=$((i+1)); done"})
	if res.Success() || !strings.Contains(res.Stderr.Text(), "No space left") {
		t.Errorf("creating 200 files with 64 inodes: %s, stderr %q; want ENOSPC", res.String(), res.Stderr.Text())
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), ws) {
		t.Errorf("the workspace %s is still mounted after Close", ws)
	}
	checkGone(t, sb)
}

// TestWorkspaceSnapshotSparse: a sparse file makes a temporary workspace
// hold far more bytes than its quota without using it (truncate -s 1T);
// Snapshot and Download, which the host runs to keep or restore a
// workspace, must not stream those zeros to the host: a tree holding
// more than its file system can is ErrResourceExhausted, with no more
// than the quota written.
func TestWorkspaceSnapshotSparse(t *testing.T) {
	const quota = 1 << 20
	rt := requireSandbox(t, sandbox.Options{WorkspaceSize: quota})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if res := mustExec(t, sb, execbox.ExecRequest{Shell: "echo kept > small && mkdir d && truncate -s 1T d/sparse"}); !res.Success() {
		t.Fatalf("making a sparse file: %s, stderr %q", res.String(), res.Stderr.Text())
	}
	for name, f := range map[string]func(w *cappedWriter) error{
		"snapshot": func(w *cappedWriter) error { return sb.Snapshot(t.Context(), w) },
		"download": func(w *cappedWriter) error { return sb.Files().Download(t.Context(), "d", w) },
		"file":     func(w *cappedWriter) error { return sb.Files().Download(t.Context(), "d/sparse", w) },
	} {
		w := &cappedWriter{max: 64 << 20}
		err := f(w)
		if !errors.Is(err, execbox.ErrResourceExhausted) || w.n > 2*quota {
			t.Errorf("%s of a 1 TiB sparse file in a 1 MiB workspace: %v after %d bytes; want ErrResourceExhausted within %d bytes", name, err, w.n, 2*quota)
		}
	}
	if res := mustExec(t, sb, execbox.ExecRequest{Shell: "rm d/sparse"}); !res.Success() {
		t.Fatal(res.String())
	}
	if err := sb.Snapshot(t.Context(), &cappedWriter{max: 64 << 20}); err != nil {
		t.Errorf("snapshot without the sparse file: %v", err)
	}
}

// cappedWriter counts what it is given and fails past max bytes.
type cappedWriter struct{ n, max int64 }

func (w *cappedWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	if w.n > w.max {
		return 0, errors.New("cappedWriter: too much written")
	}
	return len(p), nil
}

// TestWorkspaceSnapshotIncomplete: a file the command user cannot read
// stops a walk; Snapshot and Download must then fail, not end the
// archive early and report success (a sandbox could hide the rest of its
// workspace, in name order, from whoever keeps or checks its snapshot).
func TestWorkspaceSnapshotIncomplete(t *testing.T) {
	rt := requireSandbox(t, sandbox.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if res := mustExec(t, sb, execbox.ExecRequest{Shell: "mkdir t && echo 1 > t/a && chmod 000 t/a && echo important > t/b"}); !res.Success() {
		t.Fatalf("setup: %s, stderr %q", res.String(), res.Stderr.Text())
	}
	var b bytes.Buffer
	if err := sb.Snapshot(t.Context(), &b); err == nil {
		t.Errorf("Snapshot with an unreadable file: nil error and %d bytes (t/b in them: %v), want an error", b.Len(), bytes.Contains(b.Bytes(), []byte("important")))
	}
	b.Reset()
	if err := sb.Files().Download(t.Context(), "t", &b); err == nil {
		t.Errorf("Download of a directory with an unreadable file: nil error and %d bytes, want an error", b.Len())
	}
}

// TestSystemWorkspaceRefused: / , a system directory or a home directory
// of root is not given to a sandbox read-write unless asked explicitly
// (the CLI's default workspace is the current directory, and an
// administrator's is often /root).
func TestSystemWorkspaceRefused(t *testing.T) {
	testutil.Require(t, testutil.Root) // system directories only root can make
	rt := requireSandbox(t, sandbox.Options{})
	for _, dir := range []string{"/", "/etc", "/usr/share", "/root", "/var", "/run", "/boot", "/dev", "/proc/self", "/tmp", "/var/tmp"} {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir})
		if err == nil {
			sb.Close()
			t.Errorf("workspace %s: accepted, want refused", dir)
			continue
		}
		var fe *execbox.FieldError
		if !errors.Is(err, execbox.ErrPermission) || !errors.As(err, &fe) || fe.Field != "workspace" {
			t.Errorf("workspace %s: %v, want ErrPermission naming workspace", dir, err)
		}
	}
	// Explicitly allowed: a directory below /run.
	dir, err := os.MkdirTemp("/run", "execbox-ws-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir}); err == nil {
		sb.Close()
		t.Errorf("workspace %s: accepted without allow_system_workspace", dir)
	}
	sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: dir, AllowSystemWorkspace: true})
	if errors.Is(err, execbox.ErrUnsupported) {
		// /run is a tmpfs, idmappable only from Linux 6.3: the override
		// passed the check, the file system refused the mount.
		t.Logf("workspace %s with allow_system_workspace: %v", dir, err)
		return
	}
	if err != nil {
		t.Fatalf("workspace %s with allow_system_workspace: %v", dir, err)
	}
	defer sb.Close()
	if res := mustExec(t, sb, execbox.ExecRequest{Shell: "echo x > f"}); !res.Success() {
		t.Errorf("writing the allowed workspace: %s", res.String())
	}
}

// TestHostStateFiles: the agent's socket, the sandbox's record and the
// state directory, parents execbox created included, are root's only.
func TestHostStateFiles(t *testing.T) {
	parent, err := os.MkdirTemp("", "execbox-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	state := filepath.Join(parent, "a", "state")
	rt := requireSandbox(t, sandbox.Options{StateDir: state})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	dir := filepath.Join(state, sb.ID())
	for p, want := range map[string]os.FileMode{
		filepath.Join(parent, "a"): 0o700, state: 0o700, dir: 0o700,
		filepath.Join(dir, "agent.sock"): 0o600, filepath.Join(dir, "owner.json"): 0o600,
	} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
			t.Errorf("%s: mode %o uid %d, want uid %d's %o", p, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid, os.Geteuid(), want)
		}
	}
	if res := mustExec(t, sb, execbox.ExecRequest{Shell: "echo ok"}); !res.Success() {
		t.Errorf("a sandbox with a root-only state directory: %s", res.String())
	}
}

// TestGivenWorkspaceOwner: in a given workspace, what the command user
// writes belongs to the directory's owner on the host, and any other
// inside uid (root included) can create nothing: none of it is host
// root's, none a device node.
func TestGivenWorkspaceOwner(t *testing.T) {
	testutil.Require(t, testutil.Root) // idmapped workspaces of other owners
	rt := requireSandbox(t, sandbox.Options{})
	parent, err := os.MkdirTemp("", "execbox-given-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	const owner = 54321
	// Writable by all: only the idmapping stands in the way of the
	// other inside uids.
	if err := os.Chown(parent, owner, owner); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o777); err != nil {
		t.Fatal(err)
	}
	sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: parent})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// The seccomp filter refuses set-id modes everywhere (the file stays
	// 0755); the rest is the command user's to write.
	if res := mustExec(t, sb, execbox.ExecRequest{Shell: "echo x > mine && cp /bin/sh suid && ! chmod 4755 suid"}); !res.Success() {
		t.Fatalf("the command user writing its workspace: %s %s", res.String(), res.Stderr.Text())
	}
	for _, uid := range []uint32{0, 1, 65534} {
		res := mustExec(t, sb, execbox.ExecRequest{User: &execbox.User{UID: uid, GID: uid}, Shell: "echo x > by-" + itoa(int(uid)) + "; mkdir d-" + itoa(int(uid)) + "; mknod n-" + itoa(int(uid)) + " c 1 3; chown 0:0 mine"})
		t.Logf("uid %d inside: %s", uid, res.Stderr.Text())
		if res.Success() {
			t.Errorf("uid %d inside wrote the workspace, want refused: %s", uid, res.String())
		}
	}
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(parent, e.Name()), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != owner || st.Gid != owner || st.Mode&unix.S_IFMT != unix.S_IFREG {
			t.Errorf("%s: %d:%d mode %o, want a file of the workspace's owner %d", e.Name(), st.Uid, st.Gid, st.Mode, owner)
		}
	}
	if len(ents) != 2 {
		t.Errorf("workspace holds %d entries, want mine and suid", len(ents))
	}
}

// TestUIDRangesMachineWide: two runtimes with different state
// directories (two execbox processes, say) never give their sandboxes
// the same host uid range.
func TestUIDRangesMachineWide(t *testing.T) {
	testutil.Require(t, testutil.Root) // rootless takes no range from the machine
	bases := map[uint32]string{}
	for i := range 2 {
		rt := requireSandbox(t, sandbox.Options{})
		sb, err := rt.Create(t.Context(), execbox.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		fi, err := os.Stat("/proc/" + itoa(sandbox.InitPID(sb.(*sandbox.Sandbox))))
		if err != nil {
			t.Fatal(err)
		}
		uid := fi.Sys().(*syscall.Stat_t).Uid
		if other, ok := bases[uid]; ok {
			t.Errorf("runtime %d's sandbox %s has host uid %d, as %s of the other runtime", i, sb.ID(), uid, other)
		}
		bases[uid] = sb.ID()
	}
}
