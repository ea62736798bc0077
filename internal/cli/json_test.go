package cli

import (
	"encoding/json"
	"maps"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
)

// decodeObject decodes s, a JSON object, or fails the test.
func decodeObject(t *testing.T, what, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%s: not a JSON object: %v\n%s", what, err, s)
	}
	return m
}

// keysOf returns the sorted keys of v, a JSON object.
func keysOf(t *testing.T, what string, v any) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: %T is not a JSON object", what, v)
	}
	return slices.Sorted(maps.Keys(m))
}

// wantKeys fails unless the JSON object v has exactly the keys want.
func wantKeys(t *testing.T, what string, v any, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := keysOf(t, what, v); !slices.Equal(got, want) {
		t.Errorf("%s: keys %q, want %q", what, got, want)
	}
}

// TestJSONResultShape checks that exec, run and parallel print a command's
// result in one form, the HTTP API's Result: the same keys, durations in
// milliseconds, output as text when valid UTF-8 and base64 data when not.
func TestJSONResultShape(t *testing.T) {
	testutil.Require(t, testutil.Command("git"))
	t.Parallel()
	const script = `echo hi; printf '\377' >&2`

	ws := t.TempDir()
	repo := filepath.Join(ws, "work")
	for _, args := range [][]string{
		{"init", "--quiet", "--initial-branch=main", repo},
		{"-C", repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "--quiet", "--allow-empty", "-m", "base"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v: %s", args, err, out)
		}
	}

	results := map[string]any{}

	o := mainRun(t, nil, nil, "exec", "--config=", "--temp-workspace", "--json", "--", "sh", "-c", script)
	if o.code != 0 {
		t.Fatalf("exec: exit code %d", o.code)
	}
	results["exec"] = decodeObject(t, "exec --json", o.stdout)

	o = mainRun(t, nil, nil, "run", "--config=", "--json", "--lang", "sh", "-c", script)
	if o.code != 0 {
		t.Fatalf("run: exit code %d", o.code)
	}
	run := decodeObject(t, "run --json", o.stdout)
	// The run's own details sit beside the result's fields.
	runOwn := []string{"phase", "compile", "language", "toolchain", "version", "command", "limits", "dir"}
	for _, k := range []string{"phase", "language", "toolchain", "command", "limits", "dir"} {
		if _, ok := run[k]; !ok {
			t.Errorf("run --json lacks %q", k)
		}
	}
	if run["phase"] != "run" || run["language"] != "sh" {
		t.Errorf("run --json: phase %v, language %v", run["phase"], run["language"])
	}
	if l, ok := run["limits"].(map[string]any); !ok || l["cpu_time_ms"] == nil {
		t.Errorf("run --json: limits %v, want cpu_time_ms", run["limits"])
	}
	runRes := maps.Clone(run)
	for _, k := range runOwn {
		delete(runRes, k)
	}
	results["run"] = runRes

	o = mainRun(t, nil, nil, "parallel", "--config=", "--workspace", ws, "--repo", "work", "-n", "1", "--json", "--", "sh", "-c", script)
	if o.code != 0 {
		t.Fatalf("parallel: exit code %d", o.code)
	}
	var tasks []map[string]any
	if err := json.Unmarshal([]byte(o.stdout), &tasks); err != nil || len(tasks) != 1 {
		t.Fatalf("parallel --json: %v, %d tasks\n%s", err, len(tasks), o.stdout)
	}
	wantKeys(t, "parallel task", tasks[0], "name", "branch", "path", "base", "ok", "result", "status", "head", "duration_ms")
	if d, ok := tasks[0]["duration_ms"].(float64); !ok || d <= 0 || d > 60_000 {
		t.Errorf("parallel task: duration_ms %v, want milliseconds", tasks[0]["duration_ms"])
	}
	wantKeys(t, "parallel task status", tasks[0]["status"],
		"commit", "branch", "detached", "ahead", "behind", "staged", "unstaged", "untracked", "conflicts")
	results["parallel"] = tasks[0]["result"]

	for _, name := range []string{"exec", "run", "parallel"} {
		res := results[name]
		wantKeys(t, name+" result", res, "reason", "exit_code", "stdout", "stderr",
			"duration_ms", "user_time_ms", "system_time_ms", "peak_memory")
		m := res.(map[string]any)
		if m["reason"] != "exited" || m["exit_code"] != 0.0 {
			t.Errorf("%s result: reason %v, exit_code %v", name, m["reason"], m["exit_code"])
		}
		if want := map[string]any{"text": "hi\n", "total": 3.0}; !reflect.DeepEqual(m["stdout"], want) {
			t.Errorf("%s result: stdout %v, want %v", name, m["stdout"], want)
		}
		if want := map[string]any{"data": "/w==", "total": 1.0}; !reflect.DeepEqual(m["stderr"], want) {
			t.Errorf("%s result: stderr %v, want %v (base64 of a byte that is not UTF-8)", name, m["stderr"], want)
		}
		// Milliseconds: a nanosecond count of a process's life is far
		// larger.
		if d, ok := m["duration_ms"].(float64); !ok || d <= 0 || d > 60_000 {
			t.Errorf("%s result: duration_ms %v, want milliseconds", name, m["duration_ms"])
		}
	}
}

// TestGitJSONShapes checks the keys of git's --json outputs: snake_case,
// times as RFC 3339 strings.
func TestGitJSONShapes(t *testing.T) {
	testutil.Require(t, testutil.Command("git"))
	t.Parallel()
	ws := t.TempDir()
	repo := filepath.Join(ws, "work")
	for _, args := range [][]string{
		{"init", "--quiet", "--initial-branch=main", repo},
		{"-C", repo, "-c", "user.name=Ann", "-c", "user.email=ann@example.com", "commit", "--quiet", "--allow-empty", "-m", "base"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v: %s", args, err, out)
		}
	}
	git := func(args ...string) string {
		t.Helper()
		o := mainRun(t, nil, nil, append([]string{"git", "--config=", "--workspace", ws, "--repo", "work"}, args...)...)
		if o.code != 0 {
			t.Fatalf("git %q: exit code %d", args, o.code)
		}
		return o.stdout
	}

	wantKeys(t, "status", decodeObject(t, "status --json", git("status", "--json")),
		"commit", "branch", "detached", "ahead", "behind", "staged", "unstaged", "untracked", "conflicts")

	var log []map[string]any
	if err := json.Unmarshal([]byte(git("log", "--json")), &log); err != nil || len(log) != 1 {
		t.Fatalf("log --json: %v, %d commits", err, len(log))
	}
	wantKeys(t, "commit", log[0], "hash", "parents", "author", "author_time", "committer", "commit_time", "subject", "message")
	wantKeys(t, "commit author", log[0]["author"], "name", "email")
	if s, ok := log[0]["author_time"].(string); !ok || !strings.Contains(s, "T") {
		t.Errorf("author_time %v, want an RFC 3339 string", log[0]["author_time"])
	}

	if err := exec.Command("sh", "-c", "echo x > "+filepath.Join(repo, "f")+" && git -C "+repo+" add f").Run(); err != nil {
		t.Fatal(err)
	}
	diff := decodeObject(t, "diff --json", git("diff", "--staged", "--json"))
	wantKeys(t, "diff", diff, "files", "patch")
	files, _ := diff["files"].([]any)
	if len(files) != 1 {
		t.Fatalf("diff files %v", diff["files"])
	}
	wantKeys(t, "diff file", files[0], "path", "added", "deleted")

	var wts []map[string]any
	if err := json.Unmarshal([]byte(git("worktree", "list", "--json")), &wts); err != nil || len(wts) != 1 {
		t.Fatalf("worktree list --json: %v, %d worktrees", err, len(wts))
	}
	wantKeys(t, "worktree", wts[0], "path", "head", "branch", "main")
}
