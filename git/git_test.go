package git_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/git"
)

func TestClonePushPull(t *testing.T) {
	e := newEnv(t, git.Options{})
	ctx := ctx(t)
	url := e.remote()
	a := e.clone(url, "a")
	b, err := e.c.Clone(ctx, git.CloneOptions{URL: url, Path: filepath.Join(e.ws, "b"), Depth: 1, Branch: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.Dir(), "b"; got != want {
		t.Errorf("Dir() = %q, want %q", got, want)
	}

	h1 := e.commit(a, "add a.txt\n\nwith a body\n", "a.txt", "from a\n")
	st, err := a.Status(ctx, git.StatusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Branch != "main" || st.Upstream != "origin/main" || st.Ahead != 1 || st.Behind != 0 || !st.Clean() || st.Commit != h1 {
		t.Errorf("status after commit = %+v, want main...origin/main ahead 1, clean, at %s", st, h1)
	}
	if err := a.Push(ctx, git.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Pull(ctx, git.PullOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.read("b/a.txt"); got != "from a\n" {
		t.Errorf("b/a.txt = %q after pull", got)
	}
	head, err := b.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if head != h1 {
		t.Errorf("b's HEAD = %s, want %s", head, h1)
	}

	// b commits as Bob, pushes; a fetches and is behind by one.
	e.write("b/b.txt", "from b\n")
	if err := b.Add(ctx, git.AddOptions{Paths: []string{"b.txt"}}); err != nil {
		t.Fatal(err)
	}
	h2, err := b.Commit(ctx, git.CommitOptions{Message: "add b.txt", Author: bob})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Push(ctx, git.PushOptions{Remote: "origin", Refspecs: []string{"main"}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Fetch(ctx, git.FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err = a.Status(ctx, git.StatusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Ahead != 0 || st.Behind != 1 {
		t.Errorf("a after fetch: ahead %d behind %d, want 0 1", st.Ahead, st.Behind)
	}
	if err := a.Pull(ctx, git.PullOptions{FFOnly: true}); err != nil {
		t.Fatal(err)
	}

	log, err := a.Log(ctx, git.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 3 {
		t.Fatalf("log has %d commits, want 3: %+v", len(log), log)
	}
	got := log[0]
	if got.Hash != h2 || got.Author != *bob || got.Committer != *alice || got.Subject != "add b.txt" || len(got.Parents) != 1 || got.Parents[0] != h1 {
		t.Errorf("log[0] = %+v, want %s by Bob, committed by Alice, parent %s", got, h2, h1)
	}
	if log[1].Message != "add a.txt\n\nwith a body" || log[1].Subject != "add a.txt" {
		t.Errorf("log[1] message = %q subject %q", log[1].Message, log[1].Subject)
	}
	if len(log[2].Parents) != 0 || log[2].AuthorTime.IsZero() {
		t.Errorf("root commit = %+v", log[2])
	}
	one, err := a.Log(ctx, git.LogOptions{MaxCount: 1, Paths: []string{"a.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(one) != 1 || one[0].Hash != h1 {
		t.Errorf("log of a.txt = %+v, want %s", one, h1)
	}

	// No identity leaked in from anywhere: the remote's config has none.
	if cfg := e.read("a/.git/config"); strings.Contains(cfg, "[user]") {
		t.Errorf(".git/config got a user section:\n%s", cfg)
	}
}

func TestStatusDirtyTree(t *testing.T) {
	e := newEnv(t, git.Options{})
	ctx := ctx(t)
	r, err := e.c.Init(ctx, git.InitOptions{Path: "r"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Status(ctx, git.StatusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Commit != "" || st.Branch != "main" || !st.Clean() {
		t.Errorf("fresh repository status = %+v", st)
	}
	if log, err := r.Log(ctx, git.LogOptions{}); err != nil || len(log) != 0 {
		t.Errorf("Log of an empty repository = %v, %v; want empty, nil", log, err)
	}
	if _, err := r.Head(ctx); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("Head of an empty repository: %v, want ErrNotFound", err)
	}

	e.commit(r, "base", "keep.txt", "k\n", "mod.txt", "1\n", "del.txt", "d\n", "old name.txt", "rename me\n")
	e.write("r/mod.txt", "2\n")         // unstaged modification
	e.write("r/new.txt", "new\n")       // staged addition
	e.write("r/dir/untracked.txt", "u") // untracked, in a directory
	e.write("r/ü b.txt", "u")           // untracked, odd name
	e.git(r, "add", "new.txt")
	e.git(r, "rm", "-q", "del.txt")
	e.git(r, "mv", "old name.txt", "new name.txt")
	e.write("r/new.txt", "newer\n") // staged and modified again

	st, err = r.Status(ctx, git.StatusOptions{Untracked: git.UntrackedAll})
	if err != nil {
		t.Fatal(err)
	}
	wantStaged := []git.FileStatus{
		{Path: "del.txt", Change: git.Deleted},
		{Path: "new name.txt", OrigPath: "old name.txt", Change: git.Renamed},
		{Path: "new.txt", Change: git.Added},
	}
	wantUnstaged := []git.FileStatus{
		{Path: "mod.txt", Change: git.Modified},
		{Path: "new.txt", Change: git.Modified},
	}
	sortFS := func(fs []git.FileStatus) {
		slices.SortFunc(fs, func(a, b git.FileStatus) int { return strings.Compare(a.Path, b.Path) })
	}
	sortFS(st.Staged)
	sortFS(st.Unstaged)
	slices.Sort(st.Untracked)
	if !slices.Equal(st.Staged, wantStaged) {
		t.Errorf("staged = %+v, want %+v", st.Staged, wantStaged)
	}
	if !slices.Equal(st.Unstaged, wantUnstaged) {
		t.Errorf("unstaged = %+v, want %+v", st.Unstaged, wantUnstaged)
	}
	if want := []string{"dir/untracked.txt", "ü b.txt"}; !slices.Equal(st.Untracked, want) {
		t.Errorf("untracked = %q, want %q", st.Untracked, want)
	}
	if st.Clean() {
		t.Error("dirty tree reported clean")
	}
	st, err = r.Status(ctx, git.StatusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(st.Untracked, "dir/") {
		t.Errorf("untracked (normal) = %q, want dir/", st.Untracked)
	}

	// A dirty tree stops a checkout that would overwrite it.
	e.git(r, "branch", "other")
	e.git(r, "stash", "-q", "--include-untracked")
	e.write("r/mod.txt", "on other\n")
	if err := r.Checkout(ctx, git.CheckoutOptions{Branch: "other"}); err != nil {
		t.Fatal(err) // mod.txt is the same on both branches: carried over
	}
	e.commit(r, "other changes mod", "mod.txt", "committed on other\n")
	e.write("r/mod.txt", "dirty\n")
	err = r.Checkout(ctx, git.CheckoutOptions{Branch: "main"})
	if !errors.Is(err, git.ErrLocalChanges) {
		t.Fatalf("checkout over a dirty file: %v, want ErrLocalChanges", err)
	}
	if err := r.Checkout(ctx, git.CheckoutOptions{Branch: "main", Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := e.read("r/mod.txt"); got != "1\n" {
		t.Errorf("mod.txt after forced checkout = %q", got)
	}

	d, err := r.Diff(ctx, git.DiffOptions{From: "main", To: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 1 || d.Files[0] != (git.FileDiff{Path: "mod.txt", Added: 1, Deleted: 1}) {
		t.Errorf("diff main other files = %+v", d.Files)
	}
	if !strings.Contains(d.Patch, "-1\n+committed on other\n") || d.Truncated {
		t.Errorf("diff patch = %q", d.Patch)
	}
}

func TestDiff(t *testing.T) {
	e := newEnv(t, git.Options{})
	ctx := ctx(t)
	r, err := e.c.Init(ctx, git.InitOptions{Path: "r"})
	if err != nil {
		t.Fatal(err)
	}
	e.commit(r, "base", "a.txt", "a\nb\nc\n", "long.txt", strings.Repeat("same line\n", 20))
	e.write("r/a.txt", "a\nB\nc\nd\n")
	e.write("r/bin.dat", "\x00\x01\x02")
	e.git(r, "add", "bin.dat")
	e.git(r, "mv", "long.txt", "moved.txt")

	d, err := r.Diff(ctx, git.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []git.FileDiff{{Path: "a.txt", Added: 2, Deleted: 1}}; !slices.Equal(d.Files, want) {
		t.Errorf("unstaged diff = %+v, want %+v", d.Files, want)
	}
	d, err = r.Diff(ctx, git.DiffOptions{Staged: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []git.FileDiff{{Path: "bin.dat", Binary: true}, {Path: "moved.txt", OrigPath: "long.txt"}}
	if !slices.Equal(d.Files, want) {
		t.Errorf("staged diff = %+v, want %+v", d.Files, want)
	}
	if !strings.Contains(d.Patch, "rename from long.txt") || !strings.Contains(d.Patch, "Binary files") {
		t.Errorf("staged patch = %q", d.Patch)
	}
	d, err = r.Diff(ctx, git.DiffOptions{From: "HEAD", Paths: []string{"a.txt"}, Context: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 1 || d.Files[0].Path != "a.txt" {
		t.Errorf("diff HEAD -- a.txt = %+v", d.Files)
	}
}

func TestDetachedHead(t *testing.T) {
	e := newEnv(t, git.Options{})
	ctx := ctx(t)
	r, err := e.c.Init(ctx, git.InitOptions{Path: "r"})
	if err != nil {
		t.Fatal(err)
	}
	h1 := e.commit(r, "one", "f", "1")
	e.commit(r, "two", "f", "2")
	e.git(r, "tag", "v1", h1)

	for _, tc := range []struct {
		name string
		opts git.CheckoutOptions
	}{
		{"commit", git.CheckoutOptions{Branch: h1}},
		{"tag", git.CheckoutOptions{Branch: "v1"}},
		{"explicit", git.CheckoutOptions{Branch: "main~1", Detach: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := r.Checkout(ctx, tc.opts); err != nil {
				t.Fatal(err)
			}
			st, err := r.Status(ctx, git.StatusOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !st.Detached || st.Branch != "" || st.Commit != h1 || st.Upstream != "" {
				t.Errorf("status = %+v, want detached at %s", st, h1)
			}
			if got := e.read("r/f"); got != "1" {
				t.Errorf("f = %q, want 1", got)
			}
		})
	}
	// A branch made from the detached HEAD.
	if err := r.Checkout(ctx, git.CheckoutOptions{Branch: "fix", Create: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.Checkout(ctx, git.CheckoutOptions{Branch: "fix", Create: true}); !errors.Is(err, git.ErrExists) {
		t.Errorf("creating an existing branch: %v, want ErrExists", err)
	}
	if err := r.Checkout(ctx, git.CheckoutOptions{Branch: "nosuch"}); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("checkout of a missing branch: %v, want ErrNotFound", err)
	}
	st, err := r.Status(ctx, git.StatusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Detached || st.Branch != "fix" || st.Commit != h1 {
		t.Errorf("status = %+v, want on fix at %s", st, h1)
	}
}

func TestMergeConflict(t *testing.T) {
	e := newEnv(t, git.Options{})
	ctx := ctx(t)
	url := e.remote()
	a, b := e.clone(url, "a"), e.clone(url, "b")
	before := e.commit(b, "b edits", "README", "b's line\n")
	e.commit(a, "a edits", "README", "a's line\n")
	if err := a.Push(ctx, git.PushOptions{}); err != nil {
		t.Fatal(err)
	}

	err := b.Push(ctx, git.PushOptions{})
	if !errors.Is(err, git.ErrRejected) {
		t.Fatalf("push behind the remote: %v, want ErrRejected", err)
	}
	err = b.Pull(ctx, git.PullOptions{Identity: bob})
	var ge *git.Error
	if !errors.Is(err, git.ErrConflict) || !errors.As(err, &ge) {
		t.Fatalf("pull with a conflict: %v, want *Error ErrConflict", err)
	}
	if !slices.Equal(ge.Conflicts, []string{"README"}) || ge.Op != "pull" || ge.Dir != "b" || !strings.Contains(ge.Message, "CONFLICT") {
		t.Errorf("conflict error = %+v", ge)
	}
	st, err := b.Status(ctx, git.StatusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []git.Conflict{{Path: "README", Kind: git.BothModified}}; !slices.Equal(st.Conflicts, want) {
		t.Errorf("conflicts = %+v, want %+v", st.Conflicts, want)
	}
	if st.Clean() {
		t.Error("conflicted tree reported clean")
	}
	// Pulling again with unresolved conflicts is a conflict too.
	if err := b.Pull(ctx, git.PullOptions{}); !errors.Is(err, git.ErrConflict) {
		t.Errorf("pull with unmerged files: %v, want ErrConflict", err)
	}

	if err := b.AbortMerge(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _ := b.Head(ctx); h != before {
		t.Errorf("HEAD after abort = %s, want %s", h, before)
	}
	if got := e.read("b/README"); got != "b's line\n" {
		t.Errorf("README after abort = %q", got)
	}

	// Resolve by hand: merge, fix, commit; then the push goes through.
	if err := b.Merge(ctx, git.MergeOptions{Rev: "origin/main"}); !errors.Is(err, git.ErrConflict) {
		t.Fatalf("merge: %v, want ErrConflict", err)
	}
	e.write("b/README", "both lines\n")
	if _, err := b.Commit(ctx, git.CommitOptions{Message: "merge", All: true, Author: bob}); err != nil {
		t.Fatal(err)
	}
	if err := b.Push(ctx, git.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	log, err := b.Log(ctx, git.LogOptions{MaxCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(log[0].Parents) != 2 {
		t.Errorf("merge commit has parents %v", log[0].Parents)
	}

	// Rebase instead of merge.
	e.commit(a, "a again", "README", "a2\n")
	if err := a.Pull(ctx, git.PullOptions{Rebase: true}); !errors.Is(err, git.ErrConflict) {
		t.Fatalf("pull --rebase: %v, want ErrConflict", err)
	}
	if err := a.AbortMerge(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = a.Status(ctx, git.StatusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Conflicts) != 0 || st.Branch != "main" {
		t.Errorf("status after rebase abort = %+v", st)
	}
}

func TestErrors(t *testing.T) {
	e := newEnv(t, git.Options{})
	ctx := ctx(t)
	url := e.remote()
	a := e.clone(url, "a")
	e.write("plain/file", "x")

	missing, err := e.c.Repo("nosuch")
	if err != nil {
		t.Fatal(err)
	}
	nodir, _ := e.c.Repo("plain")
	for _, tc := range []struct {
		name string
		err  error
		want []error
	}{
		{"missing dir", func() error { _, err := missing.Status(ctx, git.StatusOptions{}); return err }(), []error{git.ErrNotRepository, execbox.ErrNotFound}},
		{"not a repository", func() error { _, err := nodir.Status(ctx, git.StatusOptions{}); return err }(), []error{git.ErrNotRepository, execbox.ErrNotFound}},
		{"open", func() error { _, err := e.c.Open(ctx, "plain"); return err }(), []error{git.ErrNotRepository}},
		{"clone missing remote", func() error {
			_, err := e.c.Clone(ctx, git.CloneOptions{URL: "file://" + filepath.Join(e.ws, "nosuch.git"), Path: "x"})
			return err
		}(), []error{git.ErrUnreachable, execbox.ErrUnavailable}},
		{"clone closed port", func() error {
			_, err := e.c.Clone(ctx, git.CloneOptions{URL: "http://127.0.0.1:1/r.git", Path: "y"})
			return err
		}(), []error{git.ErrUnreachable}},
		{"clone into existing", func() error {
			_, err := e.c.Clone(ctx, git.CloneOptions{URL: url, Path: "a"})
			return err
		}(), []error{git.ErrExists}},
		{"clone missing branch", func() error {
			_, err := e.c.Clone(ctx, git.CloneOptions{URL: url, Path: "z", Branch: "nosuch"})
			return err
		}(), []error{execbox.ErrNotFound}},
		{"nothing to commit", func() error {
			_, err := a.Commit(ctx, git.CommitOptions{Message: "empty"})
			return err
		}(), []error{git.ErrNothingToCommit}},
		{"bad revision", func() error { _, err := a.Resolve(ctx, git.ResolveOptions{Rev: "nosuch"}); return err }(), []error{execbox.ErrNotFound}},
		{"log of bad revision", func() error { _, err := a.Log(ctx, git.LogOptions{Rev: "nosuch"}); return err }(), []error{execbox.ErrNotFound}},
		{"option injection", a.Checkout(ctx, git.CheckoutOptions{Branch: "--orphan=x"}), []error{execbox.ErrInvalidArgument}},
		{"password in URL", func() error {
			_, err := e.c.Clone(ctx, git.CloneOptions{URL: "https://u:hunter2@example.com/r.git", Path: "p"})
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error shows the password: %v", err)
			}
			return err
		}(), []error{execbox.ErrInvalidArgument}},
		{"path outside workspace", func() error {
			_, err := e.c.Clone(ctx, git.CloneOptions{URL: url, Path: "../escape"})
			return err
		}(), []error{execbox.ErrPermission}},
		{"no author", func() error {
			c := git.New(e.sb, git.Options{})
			r, _ := c.Repo("a")
			_, err := r.Commit(ctx, git.CommitOptions{Message: "m", AllowEmpty: true})
			return err
		}(), []error{execbox.ErrInvalidArgument}},
		{"push to missing remote", a.Push(ctx, git.PushOptions{Remote: "nosuch"}), []error{git.ErrUnreachable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !errors.Is(tc.err, w) {
					t.Errorf("error %q does not match %v", tc.err, w)
				}
			}
		})
	}

	// The error carries git's message and what the command did.
	_, err = nodir.Status(ctx, git.StatusOptions{})
	var ge *git.Error
	if !errors.As(err, &ge) {
		t.Fatalf("%v is not a *git.Error", err)
	}
	if !strings.Contains(ge.Message, "not a git repository") || ge.Result.ExitCode == 0 || ge.Op != "status" {
		t.Errorf("error = %+v", ge)
	}

	// Invalid options are reported all at once, by field.
	_, err = e.c.Clone(ctx, git.CloneOptions{Depth: -1, Branch: "-x", Timeout: -1})
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *execbox.FieldError
		if errors.As(e, &fe) {
			fields = append(fields, fe.Field)
		}
	}
	if want := []string{"url", "branch", "depth", "timeout"}; !slices.Equal(fields, want) {
		t.Errorf("invalid clone options: fields %q, want %q", fields, want)
	}

	// A closed sandbox is ErrClosed, passed through.
	e.sb.Close()
	if _, err := a.Head(ctx); !errors.Is(err, execbox.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

func TestHostConfigIgnored(t *testing.T) {
	// A global config, an XDG one and variables of the host that would
	// change what git does if they reached it.
	home := t.TempDir()
	cfg := "[user]\n\tname = Leaked\n\temail = leak@example.com\n[init]\n\tdefaultBranch = leaked\n[core]\n\thooksPath = /nonexistent-hooks\n"
	for _, p := range []string{".gitconfig", "git/config"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(home, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, p), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(home, ".gitconfig"))
	t.Setenv("GIT_AUTHOR_NAME", "Leaked")
	// The local runtime reads its environment when the sandbox is made,
	// and passes all of it under EnvInherit.
	e := newEnv(t, git.Options{EnvPolicy: execbox.EnvInherit, Identity: bob})
	ctx := ctx(t)
	r, err := e.c.Init(ctx, git.InitOptions{Path: "r"})
	if err != nil {
		t.Fatal(err)
	}
	e.commit(r, "m", "f", "x")
	log, err := r.Log(ctx, git.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if log[0].Author != *bob || log[0].Committer != *bob {
		t.Errorf("commit by %v / %v, want Bob: host config leaked in", log[0].Author, log[0].Committer)
	}
	out := e.git(r, "config", "--list", "--show-origin")
	if strings.Contains(out, "Leaked") || strings.Contains(out, home) {
		t.Errorf("git sees host config:\n%s", out)
	}
}

func TestPrepare(t *testing.T) {
	e := newEnv(t, git.Options{})
	ctx := ctx(t)
	url := e.remote()

	r, err := e.c.Prepare(ctx, git.PrepareOptions{URL: url, Path: "work"})
	if err != nil {
		t.Fatal(err)
	}
	e.write("work/marker", "pre-cloned")
	// Reused as given: the marker stays.
	r2, err := e.c.Prepare(ctx, git.PrepareOptions{URL: url, Path: "work"})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Dir() != r.Dir() || !e.exists("work/marker") {
		t.Error("pre-cloned repository not reused")
	}
	// Fresh insists on a new clone and never deletes.
	if _, err := e.c.Prepare(ctx, git.PrepareOptions{URL: url, Path: "work", Fresh: true}); !errors.Is(err, git.ErrExists) {
		t.Errorf("fresh clone over an existing one: %v, want ErrExists", err)
	}
	if _, err := e.c.Prepare(ctx, git.PrepareOptions{URL: url, Path: "fresh", Fresh: true}); err != nil {
		t.Fatal(err)
	}
	// Without a URL the repository must exist.
	if _, err := e.c.Prepare(ctx, git.PrepareOptions{Path: "nothing"}); !errors.Is(err, git.ErrNotRepository) {
		t.Errorf("prepare of a missing repository: %v, want ErrNotRepository", err)
	}
	if r3, err := e.c.Prepare(ctx, git.PrepareOptions{Path: filepath.Join(e.ws, "work")}); err != nil || r3.Dir() != "work" {
		t.Errorf("prepare by absolute path: %v, %v", r3, err)
	}
}

func TestGitMissing(t *testing.T) {
	e := newEnv(t, git.Options{})
	c := git.New(e.sb, git.Options{Git: "execbox-no-such-git"})
	_, err := c.Init(ctx(t), git.InitOptions{})
	if !errors.Is(err, execbox.ErrUnavailable) || errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("git not installed: %v, want ErrUnavailable (not ErrNotFound, which means a missing ref)", err)
	}
}
