package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/testutil"
)

// gitWorkspace returns a workspace holding a bare repository remote.git,
// and the file:// URL of that repository.
func gitWorkspace(t *testing.T) (ws, url string) {
	t.Helper()
	testutil.Require(t, testutil.Command("git"))
	ws = t.TempDir()
	cmd := exec.Command("git", "init", "--quiet", "--bare", "--initial-branch=main", filepath.Join(ws, "remote.git"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	return ws, "file://" + filepath.Join(ws, "remote.git")
}

// gitRunIn runs "execbox git ARGS" in workspace ws.
func gitRunIn(t *testing.T, ws string, args ...string) outcome {
	t.Helper()
	return mainRun(t, nil, nil, append([]string{"git", "--config=", "--workspace", ws}, args...)...)
}

func TestGitCommand(t *testing.T) {
	ws, url := gitWorkspace(t)
	t.Setenv(defaultAuthorEnv, "Ann <ann@example.com>")

	if o := gitRunIn(t, ws, "clone", url, "work"); o.code != 0 || o.stdout != "work\n" {
		t.Fatalf("clone: %+v", o)
	}
	if err := os.WriteFile(filepath.Join(ws, "work", "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := gitRunIn(t, ws, "--repo", "work", "status", "--json")
	var st api.GitStatus
	if err := json.Unmarshal([]byte(o.stdout), &st); err != nil || o.code != 0 {
		t.Fatalf("status --json: %+v: %v", o, err)
	}
	if st.Branch != "main" || len(st.Untracked) != 1 || st.Untracked[0] != "a.txt" {
		t.Errorf("status = %+v", st)
	}
	o = gitRunIn(t, ws, "commit", "--repo", "work", "--all", "-m", "first")
	if o.code != 0 || len(strings.TrimSpace(o.stdout)) != 40 {
		t.Fatalf("commit: %+v", o)
	}
	hash := strings.TrimSpace(o.stdout)
	if o := gitRunIn(t, ws, "push", "--repo", "work", "--set-upstream"); o.code != 0 {
		t.Fatalf("push: %+v", o)
	}
	o = gitRunIn(t, ws, "--repo", "work", "log", "--json")
	var log []commitReport
	if err := json.Unmarshal([]byte(o.stdout), &log); err != nil || len(log) != 1 || log[0].Hash != hash || log[0].Author.Name != "Ann" {
		t.Errorf("log --json = %+v, %v", log, err)
	}
	if o := gitRunIn(t, ws, "--repo", "work", "head"); strings.TrimSpace(o.stdout) != hash {
		t.Errorf("head = %q, want %s", o.stdout, hash)
	}
	if o := gitRunIn(t, ws, "--repo", "work", "worktree", "add", "wt", "--detach"); o.code != ExitUsage || !strings.Contains(o.stderr, "flags go before arguments") {
		t.Errorf("worktree add with a late flag: %+v", o)
	}
	if o := gitRunIn(t, ws, "--repo", "work", "worktree", "add", "-b", "side", "wt"); o.code != 0 || o.stdout != "wt\n" {
		t.Errorf("worktree add: %+v", o)
	}
	if o := gitRunIn(t, ws, "--repo", "work", "worktree", "list"); !strings.Contains(o.stdout, "side") {
		t.Errorf("worktree list: %+v", o)
	}
	if o := gitRunIn(t, ws, "--repo", "work", "worktree", "remove", "--force", "wt"); o.code != 0 {
		t.Errorf("worktree remove: %+v", o)
	}
	if _, err := os.Stat(filepath.Join(ws, "wt")); !os.IsNotExist(err) {
		t.Errorf("worktree directory still there: %v", err)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"git failure", []string{"--repo", "work", "checkout", "nosuch"}, exitGitFailed, "invalid reference"},
		{"not a repository", []string{"status"}, exitGitFailed, "not a git repository"},
		{"unknown operation", []string{"bogus"}, ExitUsage, "unknown operation"},
		{"missing message", []string{"--repo", "work", "commit"}, ExitUsage, "message: is required"},
		{"bad author", []string{"--repo", "work", "commit", "-m", "x", "--author", "nobody"}, ExitUsage, "--author"},
		{"token without scope", []string{"--repo", "work", "fetch", "--token-env", "EXECBOX_TEST_GIT_TOKEN"}, ExitUsage, "--token-url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("EXECBOX_TEST_GIT_TOKEN", "secret-value")
			o := gitRunIn(t, ws, tc.args...)
			if o.code != tc.code || !strings.Contains(o.stderr, tc.msg) {
				t.Errorf("got code %d, stderr %q; want %d and %q", o.code, o.stderr, tc.code, tc.msg)
			}
			if strings.Contains(o.stderr+o.stdout, "secret-value") {
				t.Error("the token is shown")
			}
		})
	}
}

func TestParallelCommand(t *testing.T) {
	ws, url := gitWorkspace(t)
	t.Setenv(defaultAuthorEnv, "Ann <ann@example.com>")
	seed := filepath.Join(ws, "seed")
	for _, args := range [][]string{
		{"init", "--quiet", "--initial-branch=main", seed},
		{"-C", seed, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "--quiet", "--allow-empty", "-m", "base"},
		{"-C", seed, "push", "--quiet", url, "main"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v: %s", args, err, out)
		}
	}

	o := mainRun(t, nil, nil, "parallel", "--config=", "--workspace", ws, "--clone", url, "--repo", "work",
		"--tasks", "a,b,c", "--max-concurrent", "2", "--commit", "task output", "--json", "--",
		"sh", "-c", `echo "$EXECBOX_TASK" > out.txt; echo "ran $EXECBOX_TASK"; [ "$EXECBOX_TASK" != b ]`)
	if o.code != exitGitFailed || !strings.Contains(o.stderr, "1 of 3 tasks failed") {
		t.Errorf("code %d, stderr %q; want %d and a failure count", o.code, o.stderr, exitGitFailed)
	}
	var reports []taskReport
	if err := json.Unmarshal([]byte(o.stdout), &reports); err != nil {
		t.Fatalf("--json output: %v\n%s", err, o.stdout)
	}
	if len(reports) != 3 {
		t.Fatalf("%d reports", len(reports))
	}
	for _, r := range reports {
		wantOK := r.Name != "b"
		if r.OK != wantOK || r.Result == nil || string(r.Result.Stdout.Bytes()) != "ran "+r.Name+"\n" || (r.Commit != "") != wantOK {
			t.Errorf("task %s = %+v, want ok=%v", r.Name, r, wantOK)
		}
	}
	out, err := exec.Command("git", "-C", filepath.Join(ws, "work"), "show", "execbox/c:out.txt").Output()
	if err != nil || string(out) != "c\n" {
		t.Errorf("execbox/c:out.txt = %q, %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "work.worktrees")); !os.IsNotExist(err) {
		t.Errorf("worktrees left: %v", err)
	}

	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"no command", []string{"-n", "2"}, "no command"},
		{"no tasks", []string{"--", "true"}, "--tasks or -n"},
		{"bad mode", []string{"--repo", "work", "-n", "1", "--mode", "fast", "--", "true"}, "mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := mainRun(t, nil, nil, append([]string{"parallel", "--config=", "--workspace", ws}, tc.args...)...)
			if o.code != ExitUsage || !strings.Contains(o.stderr, tc.msg) {
				t.Errorf("code %d, stderr %q; want %d and %q", o.code, o.stderr, ExitUsage, tc.msg)
			}
		})
	}
}
