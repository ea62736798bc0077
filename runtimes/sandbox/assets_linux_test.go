package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// startHolder starts a python3 script in sb and returns the first line
// it prints; the script is killed at the end of t.
func startHolder(t *testing.T, sb execbox.Sandbox, script string, user *execbox.User) string {
	t.Helper()
	p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: []string{"python3", "-c", script}, Timeout: time.Minute, User: user})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(t.Context()) })
	var out strings.Builder
	for ev, err := range p.Events(t.Context(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == execbox.EventStdout {
			out.Write(ev.Data)
			if line, _, ok := strings.Cut(out.String(), "\n"); ok {
				return line
			}
		}
		if ev.Kind == execbox.EventExit {
			t.Fatalf("holder exited before it printed a line: %q", out.String())
		}
	}
	t.Fatal("holder's events ended")
	return ""
}

// Assets with a Source are read on the host, as execbox's user (root),
// by provision.tarHostPath: filepath.Walk lstats each entry, then opens
// it again by path with os.Open, which follows a symlink put there in
// between. A sandbox that can write the source tree (here: sandbox A's
// workspace, used as the source of sandbox B's assets, as a pipeline
// passing one task's output to the next would) flips a regular file and
// a symlink to a root-only host file with RENAME_EXCHANGE; when the
// swap lands between the lstat and the open, host root's file is copied
// into B's workspace.
func TestAssetSourceSymlinkRace(t *testing.T) {
	testutil.Require(t, testutil.Root) // host root reading through a planted link
	testutil.Require(t, testutil.Command("python3"))
	secret := "redteam-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	secretPath := "/root/.execbox-redteam-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(secretPath, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(secretPath)
	rt := requireSandbox(t, sandbox.Options{})
	a, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	left := sandbox.Leftovers(a.(*sandbox.Sandbox))
	aws := filepath.Join(left[len(left)-1], "ws") // A's workspace on the host
	// A: "f" is a regular file as long as the secret, "l" a symlink to
	// it; swap them forever.
	startHolder(t, a, fmt.Sprintf(`
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
open("f", "w").write("x" * %d)
os.symlink(%q, "l")
print("flipping", flush=True)
while True:
    libc.renameat2(-100, b"f", -100, b"l", 2)
`, len(secret), secretPath), nil)
	for i := 0; i < 100; i++ {
		b, err := rt.Create(t.Context(), execbox.Spec{Assets: []execbox.Asset{{Source: filepath.Join(aws, "f"), Path: "got"}}})
		if err != nil {
			continue
		}
		data, _ := b.Files().ReadFile(t.Context(), "got", execbox.ReadOptions{})
		b.Close()
		if string(data) == secret {
			t.Fatalf("attempt %d: sandbox B's workspace holds host root's %s, read through a symlink sandbox A swapped into its asset source", i+1, secretPath)
		}
	}
	t.Log("the race was not won in 100 attempts")
}

// A given workspace is checked (checkWorkspace resolves its symlinks and
// refuses system directories and root's home), then stat'ed for its
// owner and cloned with open_tree, each by path: a path a sandbox can
// write (sandbox B's workspace below sandbox A's, as nested task
// directories would be) can be a directory at the check and a symlink
// to a refused directory at the stat and the clone. B then gets that
// directory read-write, its owner (root) mapped to B's command user.
func TestGivenWorkspaceSymlinkRace(t *testing.T) {
	testutil.Require(t, testutil.Root) // host root mounting through a planted link
	testutil.Require(t, testutil.Command("python3"))
	secret := "redteam-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	target := "/root/.execbox-redteam-dir-" + strconv.Itoa(os.Getpid())
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(target)
	if err := os.WriteFile(filepath.Join(target, "marker"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := requireSandbox(t, sandbox.Options{})
	a, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	left := sandbox.Leftovers(a.(*sandbox.Sandbox))
	aws := filepath.Join(left[len(left)-1], "ws")
	startHolder(t, a, fmt.Sprintf(`
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
os.mkdir("sub")
os.symlink(%q, "l")
print("flipping", flush=True)
while True:
    libc.renameat2(-100, b"sub", -100, b"l", 2)
`, target), nil)
	for i := 0; i < 100; i++ {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		b, err := rt.Create(ctx, execbox.Spec{Workspace: filepath.Join(aws, "sub")})
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("attempt %d: Create hung: %v", i+1, err)
		}
		if err != nil {
			t.Logf("attempt %d: %v", i+1, err)
			continue
		}
		res, err := b.Exec(t.Context(), execbox.ExecRequest{Shell: "cat /workspace/marker 2>/dev/null; stat -c 'mode %a' /workspace", Timeout: 10 * time.Second})
		b.Close()
		if err == nil && strings.Contains(res.Stdout.Text(), secret) {
			t.Fatalf("attempt %d: sandbox B's workspace is host root's %s (checked as a directory of sandbox A's workspace, mounted through the symlink A swapped in)", i+1, target)
		}
		if err == nil && strings.Contains(res.Stdout.Text(), "mode 700") {
			t.Fatalf("attempt %d: sandbox B's workspace is %s, a directory in root's home that checkWorkspace refuses, mounted through the symlink sandbox A swapped in after the check", i+1, target)
		}
	}
	t.Log("the race was not won in 100 attempts")
}
