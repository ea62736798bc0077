package git_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/git"
)

// TestUntrustedConfigOnHost is the regression test of git on the local
// runtime obeying a .git/config that code in a sandbox wrote: each key
// below made git run a program on the host (here: create a file outside
// the workspace). Now the operation is refused with ErrUntrustedConfig
// and runs nothing; a hook does not run, and the operation succeeds.
func TestUntrustedConfigOnHost(t *testing.T) {
	e := newEnv(t, git.Options{})
	ctx := t.Context()
	r, err := e.c.Init(ctx, git.InitOptions{Path: "r"})
	if err != nil {
		t.Fatal(err)
	}
	e.write("r/a.txt", "a\n")
	if _, err := r.Commit(ctx, git.CommitOptions{Message: "initial", All: true}); err != nil {
		t.Fatal(err)
	}
	clean := e.read("r/.git/config")
	// A program of the host, as the repository names it: it leaves a
	// file outside the workspace and passes its input through.
	host := t.TempDir()
	marker := filepath.Join(host, "ran")
	run := filepath.Join(host, "prog")
	if err := os.WriteFile(run, []byte("#!/bin/sh\ntouch "+marker+"\ncat \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	status := func() error { _, err := r.Status(ctx, git.StatusOptions{}); return err }
	for _, tc := range []struct {
		name   string
		config string
		files  map[string]string
		op     func() error
	}{
		{"core.fsmonitor", "[core]\n\tfsmonitor = " + run + "\n", nil, status},
		{"filter", "[filter \"x\"]\n\tclean = " + run + "\n", map[string]string{"r/.gitattributes": "*.txt filter=x\n"},
			func() error { return r.Add(ctx, git.AddOptions{All: true}) }},
		{"diff textconv", "[diff \"x\"]\n\ttextconv = " + run + "\n", map[string]string{"r/.gitattributes": "*.txt diff=x\n"},
			func() error { _, err := r.Diff(ctx, git.DiffOptions{}); return err }},
		{"included", "[include]\n\tpath = more\n", map[string]string{"r/.git/more": "[core]\n\tfsmonitor = " + run + "\n"}, status},
		{"core.worktree", "[core]\n\tworktree = " + host + "\n", nil, status},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for p, content := range tc.files {
				e.write(p, content)
				defer os.Remove(filepath.Join(e.ws, p))
			}
			e.write("r/.git/config", clean+tc.config)
			defer e.write("r/.git/config", clean)
			e.write("r/a.txt", "changed "+tc.name+"\n")
			err := tc.op()
			if !errors.Is(err, git.ErrUntrustedConfig) || !errors.Is(err, execbox.ErrPermission) {
				t.Errorf("%s: %v; want ErrUntrustedConfig", tc.name, err)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("%s: git ran the repository's program on the host", tc.name)
				os.Remove(marker)
			}
		})
	}

	// A hook the sandbox left runs neither; the commit is made.
	e.write("r/.git/hooks/pre-commit", "#!/bin/sh\ntouch "+marker+"\n")
	if err := os.Chmod(filepath.Join(e.ws, "r/.git/hooks/pre-commit"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit(ctx, git.CommitOptions{Message: "second", All: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a pre-commit hook ran on the host")
	}
	// What git init and clone write, remotes and identity, is no refusal.
	e.git(r, "remote", "add", "origin", "https://example.com/r.git")
	e.git(r, "config", "user.name", "Alice")
	if err := status(); err != nil {
		t.Errorf("status with an ordinary config: %v", err)
	}
}

// TestHostConfigMessage: the refusal names the keys, never a value.
func TestHostConfigMessage(t *testing.T) {
	e := newEnv(t, git.Options{})
	r, err := e.c.Init(t.Context(), git.InitOptions{Path: "r"})
	if err != nil {
		t.Fatal(err)
	}
	e.write("r/.git/config", e.read("r/.git/config")+"[core]\n\tsshCommand = secret-value\n")
	_, err = r.Status(t.Context(), git.StatusOptions{})
	if err == nil || !strings.Contains(err.Error(), "core.sshcommand") || strings.Contains(err.Error(), "secret-value") {
		t.Errorf("Status = %v; want a refusal naming core.sshcommand without its value", err)
	}
}
