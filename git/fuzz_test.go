package git

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// statusSeeds are real git status --porcelain=v2 --branch -z outputs.
var statusSeeds = []string{
	"# branch.oid 1111111111111111111111111111111111111111\x00# branch.head main\x00# branch.upstream origin/main\x00# branch.ab +2 -3\x00" +
		"1 M. N... 100644 100644 100644 aaaa bbbb staged.txt\x00" +
		"2 R. N... 100644 100644 100644 dddd dddd R100 new.txt\x00old.txt\x00" +
		"u UU N... 100644 100644 100644 100644 e1 e2 e3 both.txt\x00? dir/\x00",
	"# branch.oid (initial)\x00# branch.head (detached)\x00",
	"1 .D N... 100644 100644 000000 aaaa aaaa with space.txt\x00! ignored\x00",
	"2 C. N... 100644 100644 100644 dddd dddd C50 a\x00",
}

// FuzzParseStatus: parseStatus never panics, and every path it reports is
// one the input names: an entry's last field or a rename's origin.
func FuzzParseStatus(f *testing.F) {
	for _, s := range statusSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		st, err := parseStatus(out)
		if err != nil {
			return
		}
		named := func(p string) bool {
			for _, e := range strings.Split(out, "\x00") {
				if e == p || strings.HasSuffix(e, " "+p) {
					return true
				}
			}
			return false
		}
		for _, fs := range append(append([]FileStatus(nil), st.Staged...), st.Unstaged...) {
			if !named(fs.Path) || (fs.OrigPath != "" && !named(fs.OrigPath)) {
				t.Fatalf("parseStatus(%q) reports %+v, not in the input", out, fs)
			}
			if fs.OrigPath != "" && fs.Change != Renamed && fs.Change != Copied {
				t.Fatalf("parseStatus(%q): origin on a %v: %+v", out, fs.Change, fs)
			}
		}
		for _, c := range st.Conflicts {
			if !named(c.Path) {
				t.Fatalf("parseStatus(%q) reports conflict %+v, not in the input", out, c)
			}
		}
		if st.Detached && st.Branch != "" && !strings.Contains(out, "(detached)") {
			t.Fatalf("parseStatus(%q): detached on branch %q", out, st.Branch)
		}
	})
}

// formatLog prints commits as git log -z with logFormat does.
func formatLog(cs []Commit) string {
	var b strings.Builder
	for _, c := range cs {
		for _, f := range []string{
			c.Hash, strings.Join(c.Parents, " "), c.Author.Name, c.Author.Email,
			c.AuthorTime.Format(time.RFC3339Nano), c.Committer.Name, c.Committer.Email,
			c.CommitTime.Format(time.RFC3339Nano), c.Message + "\n",
		} {
			b.WriteString(f + "\x00")
		}
	}
	return b.String()
}

// FuzzParseLog: what parseLog returns prints back (formatLog) to output
// that parses to the same commits, and a subject is the message's first
// line.
func FuzzParseLog(f *testing.F) {
	f.Add("abc\x00def 123\x00A U Thor\x00a@x\x002026-01-02T03:04:05+01:00\x00C\x00c@x\x002026-01-02T03:04:05Z\x00subject\n\nbody\n\x00")
	f.Add("abc\x00\x00A\x00a@x\x002026-01-02T03:04:05Z\x00C\x00c@x\x002026-01-02T03:04:05Z\x00\x00")
	f.Add("")
	f.Add("a\x00b\x00")
	f.Fuzz(func(t *testing.T, out string) {
		cs, err := parseLog(out)
		if err != nil {
			return
		}
		for _, c := range cs {
			if first, _, _ := strings.Cut(c.Message, "\n"); c.Subject != first {
				t.Fatalf("parseLog(%q): subject %q of message %q", out, c.Subject, c.Message)
			}
		}
		again, err := parseLog(formatLog(cs))
		if err != nil {
			t.Fatalf("parseLog(%q) = %+v, which prints as output it refuses: %v", out, cs, err)
		}
		if len(again) != len(cs) {
			t.Fatalf("parseLog(%q): %d commits, %d after a round trip", out, len(cs), len(again))
		}
		for i := range cs {
			a, b := cs[i], again[i]
			if !a.AuthorTime.Equal(b.AuthorTime) || !a.CommitTime.Equal(b.CommitTime) {
				t.Fatalf("parseLog(%q): times of %+v change to %+v", out, a, b)
			}
			a.AuthorTime, a.CommitTime, b.AuthorTime, b.CommitTime = time.Time{}, time.Time{}, time.Time{}, time.Time{}
			if len(a.Parents) == 0 {
				a.Parents = nil
			}
			if len(b.Parents) == 0 {
				b.Parents = nil
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("parseLog(%q): %+v changes to %+v in a round trip", out, a, b)
			}
		}
	})
}

// formatWorktrees prints worktrees as git worktree list --porcelain -z.
func formatWorktrees(wts []Worktree) string {
	var b strings.Builder
	attr := func(s string) { b.WriteString(s + "\x00") }
	for _, w := range wts {
		attr("worktree " + w.Path)
		if w.Head != "" {
			attr("HEAD " + w.Head)
		}
		if w.Branch != "" {
			attr("branch refs/heads/" + w.Branch)
		}
		if w.Bare {
			attr("bare")
		}
		if w.Detached {
			attr("detached")
		}
		if w.Locked {
			attr("locked " + w.LockReason)
		}
		if w.Prunable {
			attr("prunable " + w.PrunableReason)
		}
		attr("")
	}
	return b.String()
}

// FuzzParseWorktrees: parseWorktrees returns one worktree per "worktree"
// attribute, the first one main, and its result round-trips through
// formatWorktrees.
func FuzzParseWorktrees(f *testing.F) {
	f.Add("worktree /ws\x00HEAD 1111\x00branch refs/heads/main\x00\x00worktree /ws/.wt/a\x00HEAD 2222\x00detached\x00locked because\x00\x00")
	f.Add("worktree /repo.git\x00bare\x00\x00worktree /gone\x00HEAD 3\x00branch refs/heads/x\x00prunable gitdir file points to non-existent location\x00\x00")
	f.Add("HEAD 1\x00worktree\x00locked\x00")
	f.Fuzz(func(t *testing.T, out string) {
		wts := parseWorktrees(out)
		n := 0
		for _, a := range strings.Split(out, "\x00") {
			if k, _, _ := strings.Cut(a, " "); k == "worktree" {
				n++
			}
		}
		if len(wts) != n {
			t.Fatalf("parseWorktrees(%q): %d worktrees, %d in the input", out, len(wts), n)
		}
		for i, w := range wts {
			if w.Main != (i == 0) {
				t.Fatalf("parseWorktrees(%q): worktree %d Main=%v", out, i, w.Main)
			}
		}
		if again := parseWorktrees(formatWorktrees(wts)); !reflect.DeepEqual(again, wts) {
			t.Fatalf("parseWorktrees(%q) = %+v, after a round trip %+v", out, wts, again)
		}
	})
}
