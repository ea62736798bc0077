package git

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/execbox/execbox"
)

// Change is how a file changed.
type Change string

// Changes, as git status reports them.
const (
	Added       Change = "added"
	Modified    Change = "modified"
	Deleted     Change = "deleted"
	Renamed     Change = "renamed"
	Copied      Change = "copied"
	TypeChanged Change = "type_changed" // file, symlink or submodule
)

var changes = map[byte]Change{'A': Added, 'M': Modified, 'D': Deleted, 'R': Renamed, 'C': Copied, 'T': TypeChanged}

// FileStatus is one changed file, staged or not.
type FileStatus struct {
	// Path relative to the repository's top level.
	Path string
	// OrigPath is the path before a rename or copy, else "".
	OrigPath string
	// Change is how it changed.
	Change Change
}

// ConflictKind says which sides of a merge changed a conflicted file.
type ConflictKind string

// Conflict kinds, as git status names them.
const (
	BothModified    ConflictKind = "both_modified"    // UU
	BothAdded       ConflictKind = "both_added"       // AA
	BothDeleted     ConflictKind = "both_deleted"     // DD
	AddedByUs       ConflictKind = "added_by_us"      // AU
	AddedByThem     ConflictKind = "added_by_them"    // UA
	DeletedByUs     ConflictKind = "deleted_by_us"    // DU
	DeletedByThem   ConflictKind = "deleted_by_them"  // UD
	UnknownConflict ConflictKind = "unknown_conflict" // anything newer
)

var conflictKinds = map[string]ConflictKind{
	"UU": BothModified, "AA": BothAdded, "DD": BothDeleted, "AU": AddedByUs,
	"UA": AddedByThem, "DU": DeletedByUs, "UD": DeletedByThem,
}

// Conflict is an unmerged file.
type Conflict struct {
	Path string       // relative to the repository's top level
	Kind ConflictKind // which sides changed it
}

// Status is the state of a working tree (git status --porcelain=v2).
type Status struct {
	// Commit is the hash HEAD points to; "" before the first commit.
	Commit string
	// Branch is the current branch; "" when Detached.
	Branch string
	// Detached reports a detached HEAD.
	Detached bool
	// Upstream is the current branch's upstream ("origin/main"), or "".
	Upstream string
	// UpstreamGone reports an upstream that is configured but no longer
	// exists on the remote.
	UpstreamGone bool
	// Ahead and Behind count commits relative to Upstream.
	Ahead  int
	Behind int
	// Staged are changes in the index (what Commit records).
	Staged []FileStatus
	// Unstaged are changes in the working tree not staged.
	Unstaged []FileStatus
	// Untracked are files git does not track (directories end in "/"
	// unless StatusOptions.Untracked is UntrackedAll).
	Untracked []string
	// Conflicts are unmerged files of a merge, rebase or pull.
	Conflicts []Conflict
}

// Clean reports a working tree with no change, untracked file or conflict.
func (s *Status) Clean() bool {
	return len(s.Staged) == 0 && len(s.Unstaged) == 0 && len(s.Untracked) == 0 && len(s.Conflicts) == 0
}

// UntrackedMode says how Status lists untracked files.
type UntrackedMode string

// Untracked modes.
const (
	// UntrackedNormal lists untracked files and directories (not their
	// content). It is the default.
	UntrackedNormal UntrackedMode = "normal"
	// UntrackedAll lists every untracked file.
	UntrackedAll UntrackedMode = "all"
	// UntrackedNo lists none.
	UntrackedNo UntrackedMode = "no"
)

// StatusOptions for Repo.Status.
type StatusOptions struct {
	// Untracked says how untracked files are listed. Empty means
	// UntrackedNormal.
	Untracked UntrackedMode
	// Paths limit the status to these pathspecs.
	Paths []string
}

// Status reports the branch and the changes of the working tree. It takes
// no lock, so it is safe next to other git commands on the repository.
func (r *Repo) Status(ctx context.Context, opts StatusOptions) (Status, error) {
	if rep, ok, err := r.delegated(ctx, Call{Op: OpStatus, Status: opts}); ok {
		return deref(rep.Status), err
	}

	var errs []error
	switch opts.Untracked {
	case "":
		opts.Untracked = UntrackedNormal
	case UntrackedNormal, UntrackedAll, UntrackedNo:
	default:
		errs = append(errs, execbox.Invalid("untracked", "unknown mode %q (want normal, all or no)", opts.Untracked))
	}
	errs = append(errs, checkPaths("paths", opts.Paths))
	if err := errors.Join(errs...); err != nil {
		return Status{}, err
	}
	args := []string{"status", "--porcelain=v2", "--branch", "-z", "--untracked-files=" + string(opts.Untracked), "--"}
	args = append(args, opts.Paths...)
	res, err := r.git(ctx, call{op: "status", args: args, parsed: true})
	if err != nil {
		return Status{}, err
	}
	st, err := parseStatus(string(res.Stdout.Data))
	if err != nil {
		return Status{}, fmt.Errorf("git status in %s: %w", r.dir, err)
	}
	return st, nil
}

// parseStatus parses git status --porcelain=v2 --branch -z.
//
//	# branch.oid <commit> | (initial)
//	# branch.head <branch> | (detached)
//	# branch.upstream <upstream>
//	# branch.ab +<ahead> -<behind>
//	1 <XY> <sub> <mH> <mI> <mW> <hH> <hI> <path>
//	2 <XY> <sub> <mH> <mI> <mW> <hH> <hI> <X><score> <path>\0<origPath>
//	u <XY> <sub> <m1> <m2> <m3> <mW> <h1> <h2> <h3> <path>
//	? <path>
//	! <path>
func parseStatus(out string) (Status, error) {
	var st Status
	var sawAB bool
	entries := splitNUL(out)
	for i := 0; i < len(entries); i++ {
		e := entries[i]
		if e == "" {
			continue
		}
		switch e[0] {
		case '#':
			key, val, _ := strings.Cut(strings.TrimPrefix(e, "# "), " ")
			switch key {
			case "branch.oid":
				if val != "(initial)" {
					st.Commit = val
				}
			case "branch.head":
				if val == "(detached)" {
					st.Detached = true
				} else {
					st.Branch = val
				}
			case "branch.upstream":
				st.Upstream = val
			case "branch.ab":
				sawAB = true
				if a, b, ok := strings.Cut(val, " "); ok {
					st.Ahead = atoi(strings.TrimPrefix(a, "+"))
					st.Behind = atoi(strings.TrimPrefix(b, "-"))
				}
			}
		case '1', '2':
			n := 9
			if e[0] == '2' {
				n = 10
			}
			f := strings.SplitN(e, " ", n)
			if len(f) != n || len(f[1]) != 2 {
				return Status{}, fmt.Errorf("unexpected entry %q", e)
			}
			fs := FileStatus{Path: f[n-1]}
			if e[0] == '2' {
				if i+1 >= len(entries) {
					return Status{}, fmt.Errorf("rename of %q without its origin", fs.Path)
				}
				i++
				fs.OrigPath = entries[i]
			}
			x, y := f[1][0], f[1][1]
			if c, ok := changes[x]; ok {
				s := fs
				s.Change = c
				if c != Renamed && c != Copied {
					s.OrigPath = ""
				}
				st.Staged = append(st.Staged, s)
			}
			if c, ok := changes[y]; ok {
				u := fs
				u.Change = c
				if c != Renamed && c != Copied {
					u.OrigPath = ""
				}
				st.Unstaged = append(st.Unstaged, u)
			}
		case 'u':
			f := strings.SplitN(e, " ", 11)
			if len(f) != 11 {
				return Status{}, fmt.Errorf("unexpected entry %q", e)
			}
			k, ok := conflictKinds[f[1]]
			if !ok {
				k = UnknownConflict
			}
			st.Conflicts = append(st.Conflicts, Conflict{Path: f[10], Kind: k})
		case '?':
			st.Untracked = append(st.Untracked, strings.TrimPrefix(e, "? "))
		case '!':
			// Ignored files are not asked for.
		default:
			return Status{}, fmt.Errorf("unexpected entry %q", e)
		}
	}
	st.UpstreamGone = st.Upstream != "" && !sawAB
	return st, nil
}
