package git

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/execbox/execbox"
)

func TestParseStatus(t *testing.T) {
	out := strings.Join([]string{
		"# branch.oid 1111111111111111111111111111111111111111",
		"# branch.head feature/x",
		"# branch.upstream origin/feature/x",
		"# branch.ab +2 -3",
		"1 M. N... 100644 100644 100644 aaaa bbbb staged.txt",
		"1 .D N... 100644 100644 000000 aaaa aaaa gone.txt",
		"1 AM N... 000000 100644 100644 0000 cccc with space.txt",
		"2 R. N... 100644 100644 100644 dddd dddd R100 new.txt", "old.txt",
		"u UU N... 100644 100644 100644 100644 e1 e2 e3 both.txt",
		"u DU N... 100644 000000 100644 100644 e1 e2 e3 weird.txt",
		"? untracked.txt",
		"? dir/",
		"",
	}, "\x00")
	got, err := parseStatus(out)
	if err != nil {
		t.Fatal(err)
	}
	want := Status{
		Commit:   "1111111111111111111111111111111111111111",
		Branch:   "feature/x",
		Upstream: "origin/feature/x",
		Ahead:    2, Behind: 3,
		Staged: []FileStatus{
			{Path: "staged.txt", Change: Modified},
			{Path: "with space.txt", Change: Added},
			{Path: "new.txt", OrigPath: "old.txt", Change: Renamed},
		},
		Unstaged: []FileStatus{
			{Path: "gone.txt", Change: Deleted},
			{Path: "with space.txt", Change: Modified},
		},
		Untracked: []string{"untracked.txt", "dir/"},
		Conflicts: []Conflict{{Path: "both.txt", Kind: BothModified}, {Path: "weird.txt", Kind: DeletedByUs}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseStatus =\n%+v\nwant\n%+v", got, want)
	}

	got, err = parseStatus("# branch.oid (initial)\x00# branch.head (detached)\x00# branch.upstream origin/gone\x00")
	if err != nil {
		t.Fatal(err)
	}
	if got.Commit != "" || !got.Detached || got.Branch != "" || !got.UpstreamGone {
		t.Errorf("initial detached = %+v", got)
	}
	if _, err := parseStatus("1 M.\x00"); err == nil {
		t.Error("a short entry parsed")
	}
}

func TestParseLog(t *testing.T) {
	rec := func(fields ...string) string { return strings.Join(fields, "\x00") + "\x00" }
	out := rec("h2", "p1 p0", "Bob", "bob@x", "2024-01-02T03:04:05+01:00", "Alice", "a@x", "2024-01-02T03:04:06Z", "merge\n\nbody line\n") +
		rec("h1", "", "A", "a@x", "2024-01-01T00:00:00Z", "A", "a@x", "2024-01-01T00:00:00Z", "root\n")
	got, err := parseLog(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d commits", len(got))
	}
	if c := got[0]; c.Hash != "h2" || !reflect.DeepEqual(c.Parents, []string{"p1", "p0"}) || c.Author.Name != "Bob" ||
		c.Committer.Email != "a@x" || c.Subject != "merge" || c.Message != "merge\n\nbody line" || c.AuthorTime.Hour() != 3 {
		t.Errorf("commit 0 = %+v", c)
	}
	if c := got[1]; len(c.Parents) != 0 || c.Subject != "root" {
		t.Errorf("commit 1 = %+v", c)
	}
	if _, err := parseLog("a\x00b\x00"); err == nil {
		t.Error("a partial record parsed")
	}
}

func TestParseNumstat(t *testing.T) {
	got := parseNumstat("1\t2\ta.txt\x00-\t-\tbin\x000\t0\t\x00old\x00new\x00")
	want := []FileDiff{{Path: "a.txt", Added: 1, Deleted: 2}, {Path: "bin", Binary: true}, {Path: "new", OrigPath: "old"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseNumstat = %+v, want %+v", got, want)
	}
}

func TestParseWorktrees(t *testing.T) {
	out := "worktree /ws/r\x00HEAD abc\x00branch refs/heads/main\x00\x00" +
		"worktree /ws/bare\x00bare\x00\x00" +
		"worktree /ws/wt\x00HEAD def\x00detached\x00locked because\x00prunable gitdir file points to non-existent location\x00\x00"
	got := parseWorktrees(out)
	want := []Worktree{
		{Path: "/ws/r", Head: "abc", Branch: "main", Main: true},
		{Path: "/ws/bare", Bare: true},
		{Path: "/ws/wt", Head: "def", Detached: true, Locked: true, LockReason: "because", Prunable: true, PrunableReason: "gitdir file points to non-existent location"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseWorktrees =\n%+v\nwant\n%+v", got, want)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want error
	}{
		{"fatal: not a git repository (or any of the parent directories): .git", ErrNotRepository},
		{"fatal: Authentication failed for 'https://github.com/a/b.git/'", ErrAuthentication},
		{"fatal: could not read Username for 'https://github.com': terminal prompts disabled", ErrAuthentication},
		{"fatal: unable to access 'https://x/': The requested URL returned error: 403", ErrAuthentication},
		{"git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.", ErrAuthentication},
		{"fatal: unable to access 'https://nosuch.invalid/': Could not resolve host: nosuch.invalid", ErrUnreachable},
		{"fatal: unable to access 'http://127.0.0.1:1/': Failed to connect to 127.0.0.1 port 1: Connection refused", ErrUnreachable},
		{"remote: Repository not found.\nfatal: repository 'https://github.com/a/b.git/' not found", ErrUnreachable},
		{"CONFLICT (content): Merge conflict in f\nAutomatic merge failed; fix conflicts and then commit the result.", ErrConflict},
		{"error: Pulling is not possible because you have unmerged files.", ErrConflict},
		{"error: Your local changes to the following files would be overwritten by checkout:\n\tf\nPlease commit your changes or stash them before you switch branches.", ErrLocalChanges},
		{" ! [rejected]        main -> main (fetch first)\nerror: failed to push some refs to 'x'", ErrRejected},
		{"nothing to commit, working tree clean", ErrNothingToCommit},
		{"fatal: a branch named 'x' already exists", ErrExists},
		{"fatal: destination path 'a' already exists and is not an empty directory.", ErrExists},
		{"fatal: invalid reference: nosuch", execbox.ErrNotFound},
		{"fatal: Remote branch nosuch not found in upstream origin", execbox.ErrNotFound},
		{"fatal: something new", nil},
	} {
		if got := classify(tc.msg); got != tc.want {
			t.Errorf("classify(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
	if !errors.Is(ErrNotRepository, execbox.ErrNotFound) || !errors.Is(ErrAuthentication, execbox.ErrPermission) ||
		!errors.Is(ErrUnreachable, execbox.ErrUnavailable) || errors.Is(ErrConflict, execbox.ErrInvalidArgument) {
		t.Error("kinds do not refine execbox's as documented")
	}
}

func TestAuthMatches(t *testing.T) {
	a, err := newAuth(&Credentials{URL: "https://GitHub.com/acme/", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	for u, want := range map[string]bool{
		"https://github.com/acme/app.git":      true,
		"https://github.com:443/acme/app":      true,
		"https://user@github.com/acme/app.git": true,
		"https://github.com/acme":              true,
		"https://github.com/acmex/app.git":     false,
		"https://github.com/other/app.git":     false,
		"http://github.com/acme/app.git":       false,
		"https://github.com:8443/acme/app.git": false,
		"https://github.com.evil.com/acme/":    false,
		"git@github.com:acme/app.git":          false,
		"/local/path":                          false,
	} {
		if got := a.matches(u); got != want {
			t.Errorf("matches(%q) = %v, want %v", u, got, want)
		}
	}
	root, _ := newAuth(&Credentials{URL: "http://127.0.0.1:8080", Token: "tok"})
	if !root.matches("http://127.0.0.1:8080/r.git") || root.matches("http://127.0.0.1:8081/r.git") {
		t.Error("host-only scope")
	}
}

func TestRedactor(t *testing.T) {
	a, err := newAuth(&Credentials{URL: "https://h/", Token: "tok/en+secret"})
	if err != nil {
		t.Fatal(err)
	}
	r := newRedactor(a)
	for _, s := range []string{"tok/en+secret", "tok%2Fen%2Bsecret", "Authorization: Basic eC1hY2Nlc3MtdG9rZW46dG9rL2VuK3NlY3JldA=="} {
		if got := r.string("a " + s + " b"); strings.Contains(got, "secret") || strings.Contains(got, "eC1hY2Nlc3MtdG9rZW46dG9rL2VuK3NlY3JldA") || !strings.Contains(got, redacted) {
			t.Errorf("redact(%q) = %q", s, got)
		}
	}
	// A secret cut in two by the output limit.
	res := execbox.Result{Stdout: execbox.Output{Data: []byte("head tok/en+se" + "cret tail"), OmittedAt: 14, Omitted: 100}}
	r.result(&res)
	if got := string(res.Stdout.Data); strings.Contains(got, "tok/en+") || strings.Contains(got, "cret") || res.Stdout.OmittedAt != len("head "+redacted) {
		t.Errorf("cut secret: %q at %d", got, res.Stdout.OmittedAt)
	}
	var nilR *redactor
	if nilR.string("x") != "x" {
		t.Error("nil redactor changed text")
	}
	err = r.err(errors.Join(execbox.ErrUnavailable, errors.New("url https://x:tok/en+secret@h")))
	if strings.Contains(err.Error(), "secret") || !errors.Is(err, execbox.ErrUnavailable) {
		t.Errorf("redacted error %v loses its kind or keeps the secret", err)
	}
}
