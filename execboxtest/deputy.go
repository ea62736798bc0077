package execboxtest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/execbox/execbox"
)

// testFilesDeputy: the file API serves a workspace that belongs to the
// command user, who can plant symlinks in it; whoever serves it (the
// agent, root of the sandbox or the machine) must not be steered by them
// into reading, writing, creating or removing what that user could not
// (guarantee 7; issue 11: the agent is never a confused deputy).
func testFilesDeputy(t *testing.T, s *suite) {
	sb := s.create(t, func(sp *execbox.Spec) { sp.User = &execbox.User{UID: 65534, GID: 65534} })
	root := &execbox.User{UID: 0, GID: 0}
	sh := func(user *execbox.User, script string, args ...string) string {
		t.Helper()
		return execOK(t, sb, execbox.ExecRequest{User: user, Command: append([]string{"sh", "-c", script, "sh"}, args...)})
	}
	// A directory of root's in the workspace that the user may not enter
	// (root inside a sandbox may have no capability to write the user's
	// workspace, hence the open directory around it).
	sh(nil, "mkdir -m 777 shared")
	vault, owner := "shared/vault", root
	check := `stat -c '%u %a' "$1/secret"; cat "$1/secret"; ls "$1"; ls "$1/runs"`
	want := "0 600\ntop secret\nruns\nsecret\nkeep\n"
	res := mustExec(t, sb, execbox.ExecRequest{User: root, Command: []string{"sh", "-c",
		`mkdir -m 700 "$1" "$1/runs" && printf 'top secret\n' >"$1/secret" && chmod 600 "$1/secret" && touch "$1/runs/keep"`, "sh", vault}})
	if !res.Success() {
		// The sandbox runtime's workspace is an idmapped mount on which
		// only the user has an identity: root inside (the agent too) owns
		// nothing there. The directory is then the user's own with every
		// permission taken away, which the user cannot read, write or
		// change through either (not without a chmod first): an agent
		// acting with root's capabilities (CAP_DAC_OVERRIDE) would.
		t.Logf("root cannot own files in the user's workspace here (%s): the directory is the user's, mode 0500, its file 0000", strings.TrimSpace(res.Stderr.Text()))
		owner = nil
		sh(nil, `rm -rf "$1" && mkdir -p "$1/runs" && printf 'top secret\n' >"$1/secret" && touch "$1/runs/keep" && `+
			`chmod 000 "$1/secret" && chmod 500 "$1/runs" "$1"`, vault)
		check = `stat -c '%a %s' "$1/secret"; ls "$1"; ls "$1/runs"`
		want = "0 11\nruns\nsecret\nkeep\n"
		// t.TempDir's cleanup cannot remove what it cannot enter.
		t.Cleanup(func() {
			sb.Exec(context.Background(), execbox.ExecRequest{Command: []string{"chmod", "-R", "u+rwx", vault}})
		})
	}
	sh(nil, "ln -s \"$1/secret\" x && ln -s \"$1\" runs && ln -s \"$1\" .execbox", vault)
	f, ctx := sb.Files(), t.Context()

	if b, err := f.ReadFile(ctx, "x", execbox.ReadOptions{}); err == nil {
		t.Errorf("ReadFile through a planted symlink read a file the user may not read: %q", b)
	} else if !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("ReadFile through a planted symlink: %v, want ErrPermission", err)
	}
	if err := f.WriteFile(ctx, "x", []byte("pwned\n"), execbox.WriteOptions{}); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("WriteFile through a planted symlink: %v, want ErrPermission", err)
	}
	if err := f.Mkdir(ctx, "runs/new", execbox.MkdirOptions{Parents: true}); err == nil {
		t.Error("Mkdir through a planted symlink made a directory in one the user may not write")
	}
	// What the code runners' RemoveAll does.
	if err := f.Remove(ctx, ".execbox/runs", execbox.RemoveOptions{Recursive: true}); err == nil {
		t.Error("Remove through a planted symlink removed a directory the user may not remove")
	}
	if got := sh(owner, check, vault); got != want {
		t.Errorf("the directory afterwards:\n%s\nwant it unchanged:\n%s", got, want)
	}
}
