package git_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/git"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

func TestWorktrees(t *testing.T) {
	e := newEnv(t, git.Options{})
	ctx := ctx(t)
	r, err := e.c.Init(ctx, git.InitOptions{Path: "r"})
	if err != nil {
		t.Fatal(err)
	}
	base := e.commit(r, "base", "f.txt", "base\n")

	wt, err := r.AddWorktree(ctx, git.AddWorktreeOptions{Path: "wt/one", Branch: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if wt.Dir() != "wt/one" || e.read("wt/one/f.txt") != "base\n" {
		t.Fatalf("worktree at %q not checked out", wt.Dir())
	}
	det, err := r.AddWorktree(ctx, git.AddWorktreeOptions{Path: "wt/det", Detach: true, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddWorktree(ctx, git.AddWorktreeOptions{Path: "wt/again", Branch: "one"}); !errors.Is(err, git.ErrExists) {
		t.Errorf("worktree with an existing branch: %v, want ErrExists", err)
	}
	if _, err := r.AddWorktree(ctx, git.AddWorktreeOptions{Path: "wt/again", Branch: "one", Existing: true}); err == nil {
		t.Error("a branch checked out twice")
	}
	if _, err := r.AddWorktree(ctx, git.AddWorktreeOptions{Path: "wt/bad", Branch: "x", Base: "nosuch"}); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("worktree from a missing base: %v, want ErrNotFound", err)
	}

	// Work in the worktree does not touch the main tree.
	e.commit(wt, "on one", "f.txt", "one\n")
	if got := e.read("r/f.txt"); got != "base\n" {
		t.Errorf("main tree's f.txt = %q", got)
	}

	wts, err := r.Worktrees(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []git.Worktree{
		{Path: "r", Head: base, Branch: "main", Main: true},
		{Path: "wt/det", Head: base, Detached: true},
		{Path: "wt/one", Head: wts[2].Head, Branch: "one"},
	}
	if !slices.Equal(wts, want) {
		t.Errorf("worktrees = %+v\nwant %+v", wts, want)
	}
	if wts[2].Head == base {
		t.Error("worktree one's head did not move")
	}

	// Remove: a dirty worktree needs force.
	e.write("wt/det/dirty", "x")
	if err := r.RemoveWorktree(ctx, git.RemoveWorktreeOptions{Path: det.Dir()}); err == nil {
		t.Error("removed a dirty worktree without force")
	}
	if err := r.RemoveWorktree(ctx, git.RemoveWorktreeOptions{Path: det.Dir(), Force: true}); err != nil {
		t.Fatal(err)
	}
	if e.exists("wt/det") {
		t.Error("wt/det still exists")
	}
	if err := r.RemoveWorktree(ctx, git.RemoveWorktreeOptions{Path: "wt/one", Force: true, DeleteBranch: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(ctx, git.ResolveOptions{Rev: "one"}); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("branch one after DeleteBranch: %v", err)
	}

	// Prune: a worktree whose directory vanished.
	if _, err := r.AddWorktree(ctx, git.AddWorktreeOptions{Path: "wt/gone", Branch: "gone"}); err != nil {
		t.Fatal(err)
	}
	if err := e.sb.Files().Remove(ctx, "wt/gone", execbox.RemoveOptions{Recursive: true}); err != nil {
		t.Fatal(err)
	}
	wts, err = r.Worktrees(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(wts) != 2 || !wts[1].Prunable {
		t.Errorf("worktrees after deleting one's directory = %+v, want it prunable", wts)
	}
	if err := r.PruneWorktrees(ctx); err != nil {
		t.Fatal(err)
	}
	if wts, err = r.Worktrees(ctx); err != nil || len(wts) != 1 {
		t.Errorf("worktrees after prune = %+v, %v", wts, err)
	}
}

func TestParallel(t *testing.T) {
	e := newEnv(t, git.Options{})
	ctx := ctx(t)
	url := e.remote()
	r := e.clone(url, "repo")
	base, err := r.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var running, peak atomic.Int32
	track := func(f func(ctx context.Context, wt *git.Repo) error) func(ctx context.Context, wt *git.Repo) error {
		return func(ctx context.Context, wt *git.Repo) error {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			return f(ctx, wt)
		}
	}
	tasks := []git.Task{
		// Every task writes out.txt: each its own content, in its own tree.
		{Name: "sh-1", Exec: &execbox.ExecRequest{Command: []string{"sh", "-c", `echo "task $EXECBOX_TASK ($EXECBOX_TASK_INDEX)" > out.txt; sleep 0.2`}}},
		{Name: "sh-2", Exec: &execbox.ExecRequest{Command: []string{"sh", "-c", `echo "task $EXECBOX_TASK ($EXECBOX_TASK_INDEX)" > out.txt; sleep 0.2`}}},
		{Name: "fails", Exec: &execbox.ExecRequest{Command: []string{"sh", "-c", "echo half > out.txt; echo oops >&2; exit 3"}}},
		{Name: "go", Func: track(func(ctx context.Context, wt *git.Repo) error {
			return wt.Client().Sandbox().Files().WriteFile(ctx, wt.Dir()+"/out.txt", []byte("from go\n"), execbox.WriteOptions{})
		})},
		{Name: "panics", Func: track(func(ctx context.Context, wt *git.Repo) error { panic("boom") })},
		{Name: "errs", Func: track(func(ctx context.Context, wt *git.Repo) error { return errors.New("task error") })},
		{Name: "clean", Func: track(func(ctx context.Context, wt *git.Repo) error { return nil })},
		{Name: "missing-prog", Exec: &execbox.ExecRequest{Command: []string{"no-such-program-here"}}},
		{Name: "sub", Branch: "custom/branch", Exec: &execbox.ExecRequest{Command: []string{"sh", "-c", "pwd > ../out.txt"}, Dir: "sub"}},
	}
	// "sub" needs its directory in the base commit.
	res, err := r.Parallel(ctx, git.ParallelOptions{
		Tasks:         tasks,
		MaxConcurrent: 2,
		Commit:        &git.CommitOptions{Message: "task output"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(tasks) {
		t.Fatalf("%d results for %d tasks", len(res), len(tasks))
	}
	byName := map[string]git.TaskResult{}
	for i, tr := range res {
		if tr.Name != tasks[i].Name {
			t.Errorf("result %d is %q, want %q (task order)", i, tr.Name, tasks[i].Name)
		}
		byName[tr.Name] = tr
		t.Logf("%s: ok=%v err=%v commit=%s path=%s", tr.Name, tr.OK(), tr.Err, tr.Commit, tr.Path)
	}

	for i, name := range []string{"sh-1", "sh-2"} {
		tr := byName[name]
		if !tr.OK() || tr.Commit == "" || tr.Head != tr.Commit || tr.Base != base || tr.Branch != "execbox/"+name {
			t.Errorf("%s = %+v, want OK and committed on execbox/%s from %s", name, tr, name, base)
			continue
		}
		if got, want := e.git(r, "show", tr.Branch+":out.txt"), fmt.Sprintf("task %s (%d)\n", name, i); got != want {
			t.Errorf("%s's out.txt = %q, want %q", name, got, want)
		}
		if tr.Status == nil || !slices.Equal(tr.Status.Untracked, []string{"out.txt"}) {
			t.Errorf("%s's status = %+v, want out.txt untracked", name, tr.Status)
		}
	}
	if tr := byName["go"]; !tr.OK() || e.git(r, "show", tr.Branch+":out.txt") != "from go\n" {
		t.Errorf("go = %+v", tr)
	}
	if tr := byName["fails"]; tr.OK() || tr.Err != nil || tr.Result == nil || tr.Result.ExitCode != 3 ||
		tr.Result.Stderr.Text() != "oops\n" || tr.Commit != "" || tr.Head != base {
		t.Errorf("fails = %+v, want exit 3, not committed", tr)
	}
	if tr := byName["panics"]; tr.Err == nil || !strings.Contains(tr.Err.Error(), "boom") {
		t.Errorf("panics: err %v, want the panic", tr.Err)
	}
	if tr := byName["errs"]; tr.Err == nil || !strings.Contains(tr.Err.Error(), "task error") {
		t.Errorf("errs: err %v", tr.Err)
	}
	if tr := byName["clean"]; !tr.OK() || tr.Commit != "" || tr.Head != base || !tr.Status.Clean() {
		t.Errorf("clean = %+v, want OK, nothing committed", tr)
	}
	if tr := byName["missing-prog"]; !errors.Is(tr.Err, execbox.ErrNotFound) {
		t.Errorf("missing-prog: err %v, want ErrNotFound", tr.Err)
	}
	if tr := byName["sub"]; !errors.Is(tr.Err, execbox.ErrNotFound) || tr.Branch != "custom/branch" {
		t.Errorf("sub (dir missing in the worktree) = %+v, want ErrNotFound on custom/branch", tr)
	}
	if p := peak.Load(); p > 2 {
		t.Errorf("%d tasks ran at once, MaxConcurrent is 2", p)
	}

	// Clean-up: worktrees and their directory gone, the main tree
	// untouched, branches kept.
	wts, err := r.Worktrees(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(wts) != 1 {
		t.Errorf("worktrees left: %+v", wts)
	}
	if e.exists("repo.worktrees") {
		ents, _ := e.sb.Files().List(ctx, "repo.worktrees")
		t.Errorf("worktree directory left, holding %v", ents)
	}
	if st, err := r.Status(ctx, git.StatusOptions{}); err != nil || !st.Clean() || st.Branch != "main" {
		t.Errorf("main tree after the run = %+v, %v", st, err)
	}
	if pids := procsUnder(e.ws); len(pids) > 0 {
		t.Errorf("processes left: %v", pids)
	}
}

func TestParallelSequentialKeep(t *testing.T) {
	e := newEnv(t, git.Options{})
	ctx := ctx(t)
	// A repository at the top of the workspace: worktrees go inside it
	// and must not show as untracked.
	r, err := e.c.Init(ctx, git.InitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.commit(r, "base", "f", "x")
	var mu sync.Mutex
	var order []string
	// Tasks in flight, and the most seen at once. The first task stays
	// in flight until a second one joins it, or for a second: tasks run
	// in parallel start together (all three worktrees are made at once),
	// so one that joins in that time is caught whatever the scheduling.
	var inFlight, most atomic.Int32
	var tasks []git.Task
	for i := range 3 {
		name := fmt.Sprintf("t%d", i)
		tasks = append(tasks, git.Task{Name: name, Func: func(ctx context.Context, wt *git.Repo) error {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if i == 0 {
				testutil.Poll(ctx, time.Second, func() bool { return inFlight.Load() > 1 })
			}
			return nil
		}})
	}
	res, err := r.Parallel(ctx, git.ParallelOptions{Tasks: tasks, Mode: git.ModeSequential, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := most.Load(); n != 1 {
		t.Errorf("sequential mode had %d tasks in flight at once, want 1", n)
	}
	if !slices.Equal(order, []string{"t0", "t1", "t2"}) {
		t.Errorf("sequential order = %v", order)
	}
	for _, tr := range res {
		if !tr.OK() || tr.Path != ".execbox-worktrees/"+tr.Name || !e.exists(tr.Path+"/f") {
			t.Errorf("%s = %+v, want OK and kept", tr.Name, tr)
		}
	}
	st, err := r.Status(ctx, git.StatusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Clean() {
		t.Errorf("main tree shows the worktrees: %+v", st)
	}
	if wts, _ := r.Worktrees(ctx); len(wts) != 4 {
		t.Errorf("kept worktrees = %+v", wts)
	}
	// Again: the exclude line is not repeated, and existing branches fail
	// their task only.
	res, err = r.Parallel(ctx, git.ParallelOptions{Tasks: tasks[:1], Dir: ".execbox-worktrees/again"})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, git.ErrExists) {
		t.Errorf("task on an existing branch: %v, want ErrExists", res[0].Err)
	}
	if n := strings.Count(e.read(".git/info/exclude"), "/.execbox-worktrees/"); n != 1 {
		t.Errorf("exclude has the line %d times", n)
	}
}

func TestParallelCancel(t *testing.T) {
	e := newEnv(t, git.Options{})
	r, err := e.c.Init(t.Context(), git.InitOptions{Path: "r"})
	if err != nil {
		t.Fatal(err)
	}
	e.commit(r, "base", "f", "x")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var tasks []git.Task
	for i := range 4 {
		tasks = append(tasks, git.Task{Name: fmt.Sprint("t", i), Exec: &execbox.ExecRequest{Command: []string{"sleep", "60"}}})
	}
	go func() {
		testutil.Poll(ctx, 30*time.Second, func() bool {
			n := 0
			for _, p := range procsUnder(e.ws + "/r.worktrees") {
				if strings.Contains(p, " sleep 60") {
					n++
				}
			}
			return n >= 2
		})
		cancel()
	}()
	start := time.Now()
	res, err := r.Parallel(ctx, git.ParallelOptions{Tasks: tasks, MaxConcurrent: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Parallel after cancel: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("cancel took %v", d)
	}
	for _, tr := range res {
		if !errors.Is(tr.Err, context.Canceled) {
			t.Errorf("%s: err %v, want context.Canceled", tr.Name, tr.Err)
		}
	}
	if wts, err := r.Worktrees(t.Context()); err != nil || len(wts) != 1 {
		t.Errorf("worktrees after cancel = %+v, %v", wts, err)
	}
	if pids := procsUnder(e.ws); len(pids) > 0 {
		t.Errorf("processes left: %v", pids)
	}
}

func TestParallelInvalid(t *testing.T) {
	e := newEnv(t, git.Options{Identity: alice})
	r, err := e.c.Init(t.Context(), git.InitOptions{Path: "r"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Parallel(t.Context(), git.ParallelOptions{
		Mode:          "fast",
		MaxConcurrent: -1,
		Tasks: []git.Task{
			{Name: "../x", Func: func(context.Context, *git.Repo) error { return nil }},
			{Name: "a", Func: func(context.Context, *git.Repo) error { return nil }, Exec: &execbox.ExecRequest{Command: []string{"true"}}},
			{Name: "a", Exec: &execbox.ExecRequest{Timeout: -1, Command: []string{"true"}, Dir: "../../out"}},
		},
	})
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *execbox.FieldError
		if errors.As(e, &fe) {
			fields = append(fields, fe.Field)
		}
	}
	want := []string{"mode", "max_concurrent", "tasks[0].name", "tasks[1].exec", "tasks[2].name", "tasks[2].exec.timeout", "tasks[2].exec.dir"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields = %q, want %q", fields, want)
	}
}

// TestParallelCancelDuringSetup cancels at moments spread over the
// set-up of the worktrees: whatever git was doing, nothing is left.
func TestParallelCancelDuringSetup(t *testing.T) {
	e := newEnv(t, git.Options{})
	r, err := e.c.Init(t.Context(), git.InitOptions{Path: "r"})
	if err != nil {
		t.Fatal(err)
	}
	e.commit(r, "base", "f", "x")
	for i := range 12 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i)*2*time.Millisecond)
		var tasks []git.Task
		for j := range 3 {
			tasks = append(tasks, git.Task{Name: fmt.Sprintf("r%d-t%d", i, j), Exec: &execbox.ExecRequest{Command: []string{"sleep", "60"}}})
		}
		_, err := r.Parallel(ctx, git.ParallelOptions{Tasks: tasks, MaxConcurrent: 3})
		cancel()
		if err == nil {
			t.Fatalf("round %d: no error", i)
		}
		wts, err := r.Worktrees(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(wts) != 1 {
			t.Errorf("round %d: worktrees left: %+v", i, wts)
		}
		if ents, _ := e.sb.Files().List(t.Context(), "r.worktrees"); len(ents) != 0 {
			t.Errorf("round %d: directories left: %v", i, ents)
		}
		if ents, _ := e.sb.Files().List(t.Context(), "r/.git/worktrees"); len(ents) != 0 {
			t.Errorf("round %d: administrative files left: %v", i, ents)
		}
	}
	if pids := procsUnder(e.ws); len(pids) > 0 {
		t.Errorf("processes left: %v", pids)
	}
}

// TestSymlinkedWorkspace: git prints paths with symlinks resolved; they
// still map back into the workspace.
func TestSymlinkedWorkspace(t *testing.T) {
	testutil.Require(t, testutil.Command("git"))
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	sb, err := local.New(local.Options{Logger: testutil.Logger(t)}).Create(t.Context(), execbox.Spec{Workspace: link})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	c := git.New(sb, git.Options{Identity: alice})
	ctx := ctx(t)
	r, err := c.Init(ctx, git.InitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit(ctx, git.CommitOptions{Message: "base", AllowEmpty: true}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Parallel(ctx, git.ParallelOptions{Keep: true, Tasks: []git.Task{
		{Name: "a", Func: func(context.Context, *git.Repo) error { return nil }},
	}})
	if err != nil || !res[0].OK() {
		t.Fatalf("Parallel: %v %+v", err, res)
	}
	wts, err := r.Worktrees(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(wts) != 2 || wts[0].Path != "." || wts[1].Path != ".execbox-worktrees/a" {
		t.Errorf("worktrees = %+v, want paths . and .execbox-worktrees/a", wts)
	}
	if err := r.RemoveWorktree(ctx, git.RemoveWorktreeOptions{Path: wts[1].Path, DeleteBranch: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(ctx, git.ResolveOptions{Rev: "execbox/a"}); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("branch after DeleteBranch: %v", err)
	}
	if st, err := r.Status(ctx, git.StatusOptions{}); err != nil || !st.Clean() {
		t.Errorf("status = %+v, %v", st, err)
	}
	// A directory inside a repository is not a repository to reuse:
	// Prepare clones (here, and fails: nothing to clone).
	if p, err := c.Prepare(ctx, git.PrepareOptions{Path: ".execbox-worktrees", URL: "file:///nonexistent"}); !errors.Is(err, git.ErrUnreachable) {
		t.Errorf("Prepare of a directory inside a repository = %v, %v; want ErrUnreachable from a clone", p, err)
	}
}
