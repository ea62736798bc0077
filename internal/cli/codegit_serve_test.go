package cli

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/git"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/remote"
)

// TestServeCodeAndGit: execbox run --runtime remote against execbox serve
// runs the program on the server in one POST code (compile errors
// included), and git through the Go remote runtime is one POST git/{op}
// per operation, its token never reaching the workspace or the output.
func TestServeCodeAndGit(t *testing.T) {
	testutil.Require(t, testutil.Command("python3"), testutil.Command("gcc"), testutil.Command("git"))
	const tokenVar = "EXECBOX_TEST_CODEGIT_TOKEN"
	t.Setenv(tokenVar, "tok")
	url, stderr, _ := startServeOut(t, "--listen", "127.0.0.1:0", "--token-env", tokenVar, "--runtime", "local", "--log-level", "debug")
	cfgFile := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(cfgFile, []byte("runtimes:\n  remote:\n    url: "+url+"\n    token: tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := mainRun(t, nil, strings.NewReader("hi\n"), "run", "--config", cfgFile, "--runtime", "remote", "--lang", "python", "-c", "import sys\nprint(input()[::-1])\nsys.exit(3)")
	if o.code != 3 || o.stdout != "ih\n" {
		t.Errorf("run python: code %d, stdout %q", o.code, o.stdout)
	}
	o = mainRun(t, nil, nil, "run", "--config", cfgFile, "--runtime", "remote", "--json", "--lang", "c", "-c", "int main(void) { return x; }")
	var rep api.CodeResult
	if err := json.Unmarshal([]byte(o.stdout), &rep); err != nil || rep.Phase != "compile" || rep.Compile == nil || rep.ExitCode == 0 {
		t.Errorf("run c with a compile error: %v, %+v", err, rep)
	}
	if !strings.Contains(stderr(), "path=/v1/sandboxes/") || !strings.Contains(stderr(), "/code ") {
		t.Errorf("serve logged no POST code:\n%s", stderr())
	}

	// Git through the Go remote runtime.
	origin := filepath.Join(t.TempDir(), "origin.git")
	work := t.TempDir()
	for _, args := range [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=main", origin},
		{"-C", work, "init", "--quiet", "--initial-branch=main"},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "--quiet", "--allow-empty", "-m", "first"},
		{"-C", work, "push", "--quiet", origin, "main"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	rt, err := remote.New(remote.Options{URL: url, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	const secret = "tok-2f9e-codegit-serve"
	c := git.New(sb, git.Options{
		Identity:    &git.Signature{Name: "A", Email: "a@example.com"},
		Credentials: &git.Credentials{URL: "https://git.invalid/", Token: secret},
	})
	repo, err := c.Clone(t.Context(), git.CloneOptions{URL: origin, Path: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Files().WriteFile(t.Context(), "app/f.txt", []byte("f\n"), execbox.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Commit(t.Context(), git.CommitOptions{Message: "add f", All: true}); err != nil {
		t.Fatal(err)
	}
	if err := repo.Push(t.Context(), git.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := repo.Diff(t.Context(), git.DiffOptions{From: "HEAD~1", To: "HEAD"})
	if err != nil || len(d.Files) != 1 || d.Files[0].Path != "f.txt" {
		t.Errorf("diff: %+v, %v", d, err)
	}
	_, err = repo.Commit(t.Context(), git.CommitOptions{Message: "none"})
	if !errors.Is(err, git.ErrNothingToCommit) {
		t.Errorf("nothing to commit: %v", err)
	}
	// The token went nowhere: not in serve's log, not in the workspace.
	if strings.Contains(stderr(), secret) {
		t.Errorf("serve's log holds the token")
	}
	filepath.WalkDir(sb.Workspace(), func(p string, de os.DirEntry, err error) error {
		if err == nil && !de.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), secret) {
				t.Errorf("%s holds the token", p)
			}
		}
		return nil
	})
	for _, op := range []string{"clone", "commit", "push", "diff"} {
		if !strings.Contains(stderr(), "/git/"+op+" ") {
			t.Errorf("serve logged no POST git/%s", op)
		}
	}
}
