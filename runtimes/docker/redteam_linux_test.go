package docker_test

// Red-team findings against the docker runtime: each test is an attack
// made by the commands a sandbox runs, and fails while the attack works.

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/runtimes/docker"
)

// flipPy exchanges a and b (renameat2 RENAME_EXCHANGE) in a loop: at every
// moment one of the two names is the directory and the other the symlink.
const flipPy = `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
while True:
    if libc.renameat2(-100, b"a", -100, b"b", 2) != 0:
        sys.exit("renameat2: errno %d" % ctypes.get_errno())
`

// TestRedteamWorkspaceSwappedAfterCheck: the runtime resolves a given
// workspace (filepath.EvalSymlinks), checks it (no system directory) and
// hands the engine the resolved path as a string, which the engine
// resolves again when it starts the container, a few hundred
// milliseconds later. A command of another sandbox that can write one of
// that path's directories (here: a non-root sandbox whose workspace holds
// the second one's) swaps a directory of it for a symlink in between: the
// second sandbox gets the host's /etc as its workspace, read-write.
func TestRedteamWorkspaceSwappedAfterCheck(t *testing.T) {
	rt := newRuntime(t, docker.Options{})
	ws := t.TempDir()
	if err := os.Chown(ws, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	user := &execbox.User{UID: 1000, GID: 1000}
	attacker, err := rt.Create(t.Context(), execbox.Spec{Workspace: ws, User: user})
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	res, err := attacker.Exec(t.Context(), execbox.ExecRequest{Shell: "mkdir -p a/etc && ln -s / b"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("prepare: %s %s %v", res.String(), res.Stderr.String(), err)
	}
	p, err := attacker.Start(t.Context(), execbox.ExecRequest{Command: []string{"python3", "-c", flipPy}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill(context.Background())

	// The workspace asked for, a/etc, is an empty directory: whatever a
	// victim finds in its workspace is the host's /etc (no file of the
	// host's is needed to recognise it, and nothing here can skip).
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for i := 0; i < 30 && ctx.Err() == nil; i++ {
		victim, err := rt.Create(ctx, execbox.Spec{Workspace: filepath.Join(ws, "a", "etc"), User: user})
		if err != nil {
			continue // the check saw the symlink: refused, as it should be
		}
		res, _ := victim.Exec(ctx, execbox.ExecRequest{Shell: "ls -A /workspace; test -w /workspace && echo writable"})
		victim.Close()
		if out := res.Stdout.String(); out != "" && out != "writable\n" {
			t.Fatalf("attempt %d: a sandbox created with workspace %s/a/etc, an empty directory, found %q there: the host's /etc, swapped in between the check and the engine's mount", i, ws, out)
		}
	}
	if r, _ := p.Poll(t.Context()); r != nil {
		t.Logf("the flipping command ended: %s %s", r.String(), r.Stderr.String())
	}
}

// TestRedteamSetuidRootInWorkspace: commands run as root in the container
// by default (any image without a USER), with CAP_CHOWN, CAP_FOWNER and
// CAP_FSETID, and a given workspace is the host directory itself: a
// command leaves a set-user-ID root program there, which any host user
// who reaches the directory runs as root (outside the container nothing
// sets no_new_privs). The sandbox runtime maps its root to the caller.
func TestRedteamSetuidRootInWorkspace(t *testing.T) {
	rt := newRuntime(t, docker.Options{})
	ws := t.TempDir()
	sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer checkGone(t, sb)
	defer sb.Close()
	// Every way to give a file a set-id bit: chmod, fchmod(at), creation
	// with the mode (open, creat, mknod), each refused (EPERM), and
	// openat2 absent (ENOSYS) since a filter cannot read its mode.
	script := `cp /bin/busybox rootshell; chmod 4755 rootshell; chmod g+s rootshell
python3 - <<'PY'
import os, ctypes
for name, fn in [
    ("open", lambda: os.close(os.open("created", os.O_CREAT | os.O_WRONLY, 0o4755))),
    ("fchmod", lambda: os.fchmod(os.open("rootshell", os.O_RDONLY), 0o6755)),
    ("mknod", lambda: os.mknod("node", 0o102755)),
]:
    try:
        fn()
        print(name, "allowed")
    except OSError as e:
        print(name, e.errno)
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(437, -100, b"created2", b"\0" * 24, 24)
print("openat2", ctypes.get_errno() if r < 0 else "allowed")
PY
chmod 755 rootshell && echo plain-chmod-ok`
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: script})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Stdout.String(), "open 1\nfchmod 1\nmknod 1\nopenat2 38\nplain-chmod-ok\n"; got != want {
		t.Errorf("set-id modes: %q, want %q (stderr %q)", got, want, res.Stderr.String())
	}
	filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("a command made %s with mode %v (uid %d) on the host", p, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
		}
		return nil
	})
}

// TestRedteamStateDirFill: the host's state directory is bind-mounted
// read-write at /.execbox/run, and a command running as root writes
// there without bound: past workspace_size, on the host's file system
// (by default /run/execbox/docker, the host's /run tmpfs that dockerd,
// containerd and systemd need), where the engine's quotas do not apply.
func TestRedteamStateDirFill(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	rt := newRuntime(t, docker.Options{StateDir: state, WorkspaceSize: 16 << 20})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer checkGone(t, sb)
	defer sb.Close()
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "dd if=/dev/zero of=/.execbox/run/fill bs=1M count=64 2>&1; ls -l /.execbox/run/fill"})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	filepath.Walk(state, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			total += fi.Size()
		}
		return nil
	})
	if total > 32<<20 {
		t.Errorf("a command wrote %d MiB into the host's state directory %s (workspace_size is 16 MiB): %s", total>>20, state, res.Stdout.String())
	}
}
