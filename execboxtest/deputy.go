package execboxtest

import (
	"errors"
	"testing"

	"github.com/execbox/execbox"
)

// testFilesDeputy: the file API serves a workspace that belongs to the
// command user, who can plant symlinks in it; whoever serves it (the
// agent, root of the sandbox or the machine) must not be steered by them
// into reading, writing, creating or removing what that user could not
// (guarantee 7; issue 11: the agent is never a confused deputy).
func testFilesDeputy(t *testing.T, s *suite) {
	if !s.caps.User {
		t.Skip("the runtime cannot switch users")
	}
	sb := s.create(t, func(sp *execbox.Spec) { sp.User = &execbox.User{UID: 65534, GID: 65534} })
	root := &execbox.User{UID: 0, GID: 0}
	sh := func(user *execbox.User, script string) string {
		t.Helper()
		return execOK(t, sb, execbox.ExecRequest{User: user, Command: []string{"sh", "-c", script}})
	}
	// A directory of root's in the workspace that the user may not enter
	// (root inside a sandbox may have no capability to write the user's
	// workspace, hence the open directory around it).
	sh(nil, "mkdir -m 777 shared")
	res := mustExec(t, sb, execbox.ExecRequest{User: root, Command: []string{"sh", "-c",
		"mkdir -m 700 shared/vault shared/vault/runs && printf 'top secret\\n' >shared/vault/secret && " +
			"chmod 600 shared/vault/secret && touch shared/vault/runs/keep"}})
	if !res.Success() {
		// The sandbox runtime's workspace is an idmapped mount on which
		// only the user has an identity: root inside owns nothing there,
		// which closes this class by construction (and is what passes).
		t.Logf("root cannot own files in the user's workspace here, so there is nothing to steer the agent to: %s", res.Stderr.Text())
		return
	}
	sh(nil, "ln -s shared/vault/secret x && ln -s shared/vault runs && ln -s shared/vault .execbox")
	f, ctx := sb.Files(), t.Context()

	if b, err := f.ReadFile(ctx, "x", execbox.ReadOptions{}); err == nil {
		t.Errorf("ReadFile through a planted symlink read root's 0600 file: %q", b)
	} else if !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("ReadFile through a planted symlink: %v, want ErrPermission", err)
	}
	if err := f.WriteFile(ctx, "x", []byte("pwned\n"), execbox.WriteOptions{}); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("WriteFile through a planted symlink: %v, want ErrPermission", err)
	}
	if err := f.Mkdir(ctx, "runs/new", execbox.MkdirOptions{Parents: true}); err == nil {
		t.Error("Mkdir through a planted symlink made a directory in root's 0700 directory")
	}
	// What the code runners' RemoveAll does.
	if err := f.Remove(ctx, ".execbox/runs", execbox.RemoveOptions{Recursive: true}); err == nil {
		t.Error("Remove through a planted symlink removed a directory of root's")
	}
	got := sh(root, "stat -c '%u %a' shared/vault/secret; cat shared/vault/secret; ls shared/vault; ls shared/vault/runs")
	if want := "0 600\ntop secret\nruns\nsecret\nkeep\n"; got != want {
		t.Errorf("root's directory afterwards:\n%s\nwant it unchanged:\n%s", got, want)
	}
}
