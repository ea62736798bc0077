package workspace

import (
	"archive/tar"
	"os"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
)

// The workspace belongs to a command user, who can plant symlinks in it at
// will; the agent that serves the file API may be more privileged (root
// on the local runtime). These tests are that user steering the agent
// (issue 11: the agent is never a confused deputy).

// TestDeputyWriteThroughSymlink: a symlink the owner planted to a file of
// root's in the workspace, which the owner may not write, must not make
// WriteFile overwrite that file in place.
func TestDeputyWriteThroughSymlink(t *testing.T) {
	testutil.Require(t, testutil.Root)
	t.Parallel()
	w := open(t)
	must(t, w.Chown(65534, 65534))
	// Made after Chown: root's, as a command run as root would leave them.
	if err := os.Mkdir(host(w, "vault"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeHost(t, host(w, "vault/secret"), "top secret\n", 0o600)
	writeHost(t, host(w, "open"), "anyone\n", 0o666)
	for _, l := range []struct{ name, target string }{{"x", "vault/secret"}, {"y", "open"}} {
		if err := os.Symlink(l.target, host(w, l.name)); err != nil {
			t.Fatal(err)
		}
	}

	err := w.WriteFile(t.Context(), "x", []byte("pwned\n"), execbox.WriteOptions{})
	wantKind(t, err, execbox.ErrPermission)
	if b, _ := os.ReadFile(host(w, "vault/secret")); string(b) != "top secret\n" {
		t.Errorf("root's 0600 file after a write through a planted symlink: %q, want it unchanged", b)
	}
	// A file the owner may write itself is still written in place.
	must(t, w.WriteFile(t.Context(), "y", []byte("written\n"), execbox.WriteOptions{}))
	if b, _ := os.ReadFile(host(w, "open")); string(b) != "written\n" {
		t.Errorf("world-writable file through a symlink: %q, want it written", b)
	}
}

// TestDeputyTarChmodThroughSymlink: a tar whose directory is replaced by a
// symlink (a later entry here; a command racing the upload could do the
// same) must not get the directory's mode applied to the symlink's target
// when the upload finishes.
func TestDeputyTarChmodThroughSymlink(t *testing.T) {
	t.Parallel()
	w := open(t)
	writeHost(t, host(w, "secret"), "top secret\n", 0o600)
	tr := mkTar(t,
		entry{name: "a/", typ: tar.TypeDir, mode: 0o777},
		entry{name: "a", typ: tar.TypeSymlink, link: "secret"},
	)
	if err := w.Upload(t.Context(), ".", tr); err != nil {
		t.Logf("Upload: %v", err)
	}
	fi, err := os.Stat(host(w, "secret"))
	must(t, err)
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("mode of the file a replaced directory's symlink points to: %v, want 0600 unchanged", got)
	}
}
