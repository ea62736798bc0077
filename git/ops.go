package git

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/execbox/execbox"
)

// CheckoutOptions for Repo.Checkout.
type CheckoutOptions struct {
	// Branch is the branch to switch to (a remote branch of the same name
	// is checked out as a new tracking branch, as git does). A tag or
	// commit detaches HEAD. Required.
	Branch string
	// Create makes Branch, starting at StartPoint; an existing branch is
	// ErrExists.
	Create bool
	// StartPoint is where a created branch starts. Empty means HEAD.
	StartPoint string
	// Detach checks out Branch's commit with a detached HEAD.
	Detach bool
	// Force discards local changes that would otherwise stop the checkout
	// (which is ErrLocalChanges).
	Force bool
}

// Checkout switches the working tree to a branch (git switch), creating
// it with opts.Create.
func (r *Repo) Checkout(ctx context.Context, opts CheckoutOptions) error {
	if _, ok, err := r.delegated(ctx, Call{Op: OpCheckout, Checkout: opts}); ok {
		return err
	}

	var errs []error
	errs = append(errs, checkRef("branch", opts.Branch))
	if opts.StartPoint != "" {
		errs = append(errs, checkRef("start_point", opts.StartPoint))
		if !opts.Create {
			errs = append(errs, execbox.Invalid("start_point", "is only used with create"))
		}
	}
	if opts.Create && opts.Detach {
		errs = append(errs, execbox.Invalid("detach", "cannot be set together with create"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	args := []string{"switch", "--quiet"}
	if opts.Force {
		args = append(args, "--discard-changes")
	}
	switch {
	case opts.Create:
		args = append(args, "--create", opts.Branch)
		if opts.StartPoint != "" {
			args = append(args, opts.StartPoint)
		}
	case opts.Detach:
		args = append(args, "--detach", opts.Branch)
	default:
		args = append(args, opts.Branch)
	}
	_, err := r.git(ctx, call{op: "checkout", args: args, locks: true})
	var ge *Error
	if !opts.Create && !opts.Detach && errors.As(err, &ge) && strings.Contains(ge.Message, "a branch is expected") {
		// A tag or a commit: check it out detached, as git checkout would.
		args = append(args[:len(args)-1], "--detach", opts.Branch)
		_, err = r.git(ctx, call{op: "checkout", args: args, locks: true})
	}
	return err
}

// AddOptions for Repo.Add.
type AddOptions struct {
	// Paths are pathspecs to stage, relative to the repository.
	Paths []string
	// All stages every change in the working tree, including deletions
	// and untracked files (limited to Paths if given).
	All bool
}

// Add stages changes (git add).
func (r *Repo) Add(ctx context.Context, opts AddOptions) error {
	if _, ok, err := r.delegated(ctx, Call{Op: OpAdd, Add: opts}); ok {
		return err
	}

	if len(opts.Paths) == 0 && !opts.All {
		return execbox.Invalid("paths", "is required (or all)")
	}
	if err := checkPaths("paths", opts.Paths); err != nil {
		return err
	}
	args := []string{"add"}
	if opts.All {
		args = append(args, "--all")
	}
	args = append(append(args, "--"), opts.Paths...)
	_, err := r.git(ctx, call{op: "add", args: args, locks: true})
	return err
}

// CommitOptions for Repo.Commit.
type CommitOptions struct {
	// Message is the commit message, used verbatim apart from leading and
	// trailing blank lines (lines starting with '#' are kept). Required.
	Message string
	// Author of the commit. Nil means Options.Identity; with neither,
	// Commit fails naming the field.
	Author *Signature
	// Committer of the commit. Nil means Options.Identity, else Author.
	Committer *Signature
	// All stages every change first, untracked files included (git add
	// --all), so the commit records the whole working tree.
	All bool
	// AllowEmpty records a commit even with no change; without it, no
	// change is ErrNothingToCommit.
	AllowEmpty bool
	// Amend replaces the last commit.
	Amend bool
	// NoVerify skips the pre-commit and commit-msg hooks.
	NoVerify bool
}

// Commit records the staged changes and returns the new commit's hash.
// The identity comes from the options only; no git config is consulted.
func (r *Repo) Commit(ctx context.Context, opts CommitOptions) (string, error) {
	if rep, ok, err := r.delegated(ctx, Call{Op: OpCommit, Commit: opts}); ok {
		return rep.Hash, err
	}

	var errs []error
	if strings.TrimSpace(opts.Message) == "" {
		errs = append(errs, execbox.Invalid("message", "is required"))
	}
	if strings.IndexByte(opts.Message, 0) >= 0 {
		errs = append(errs, execbox.Invalid("message", "contains a NUL byte"))
	}
	author := opts.Author
	if author == nil {
		author = r.c.opts.Identity
	}
	if author == nil {
		errs = append(errs, execbox.Invalid("author", "is required (or Options.Identity)"))
	} else {
		errs = append(errs, author.validate("author")...)
	}
	committer := opts.Committer
	if committer == nil {
		committer = r.c.opts.Identity
	}
	if committer == nil {
		committer = author
	} else {
		errs = append(errs, committer.validate("committer")...)
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	if opts.All {
		if err := r.Add(ctx, AddOptions{All: true}); err != nil {
			return "", err
		}
	}
	args := []string{"commit", "--quiet", "--cleanup=whitespace", "--file=-"}
	if opts.AllowEmpty {
		args = append(args, "--allow-empty")
	}
	if opts.Amend {
		args = append(args, "--amend")
	}
	if opts.NoVerify {
		args = append(args, "--no-verify")
	}
	if _, err := r.git(ctx, call{op: "commit", args: args, stdin: strings.NewReader(opts.Message),
		author: author, committer: committer, locks: true}); err != nil {
		return "", err
	}
	return r.Head(ctx)
}

// Head returns the hash of the commit checked out (HEAD). A repository
// with no commit yet is execbox.ErrNotFound.
func (r *Repo) Head(ctx context.Context) (string, error) {
	return r.resolve(ctx, "head", "HEAD")
}

// ResolveOptions for Repo.Resolve.
type ResolveOptions struct {
	// Rev is a revision: a branch, tag, hash, "HEAD~2", "origin/main".
	// Required.
	Rev string
}

// Resolve returns the full hash of the commit a revision names; an
// unknown revision is execbox.ErrNotFound.
func (r *Repo) Resolve(ctx context.Context, opts ResolveOptions) (string, error) {
	if err := checkRef("rev", opts.Rev); err != nil {
		return "", err
	}
	return r.resolve(ctx, "resolve", opts.Rev)
}

func (r *Repo) resolve(ctx context.Context, op, rev string) (string, error) {
	res, err := r.git(ctx, call{op: op, args: []string{"rev-parse", "--verify", "--end-of-options", rev + "^{commit}"}})
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(res.Stdout.Data)), nil
}

// PushOptions for Repo.Push.
type PushOptions struct {
	// Remote is a remote's name or a URL. Empty means "origin".
	Remote string
	// Refspecs say what to push ("main", "HEAD:refs/heads/feature").
	// Empty means the current branch, to the branch of the same name.
	Refspecs []string
	// SetUpstream makes the pushed branch the current branch's upstream.
	SetUpstream bool
	// Force overwrites the remote branch even if that loses commits.
	Force bool
	// Tags also pushes every tag.
	Tags bool
}

// Push sends commits to a remote. A refusal is ErrRejected.
func (r *Repo) Push(ctx context.Context, opts PushOptions) error {
	if _, ok, err := r.delegated(ctx, Call{Op: OpPush, Push: opts}); ok {
		return err
	}

	remote, errs := checkRemote(opts.Remote, opts.Refspecs)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	urls, err := r.remoteURLs(ctx, remote, true)
	if err != nil {
		return err
	}
	args := []string{"push", "--quiet"}
	if opts.SetUpstream {
		args = append(args, "--set-upstream")
	}
	if opts.Force {
		args = append(args, "--force")
	}
	if opts.Tags {
		args = append(args, "--tags")
	}
	args = append(args, remote)
	if len(opts.Refspecs) == 0 {
		args = append(args, "HEAD")
	}
	args = append(args, opts.Refspecs...)
	_, err = r.git(ctx, call{op: "push", args: args, urls: urls, remote: remote, locks: true})
	return err
}

// FetchOptions for Repo.Fetch.
type FetchOptions struct {
	// Remote is a remote's name or a URL. Empty means "origin".
	Remote string
	// Refspecs say what to fetch. Empty means the remote's configured
	// refspecs (all its branches).
	Refspecs []string
	// Prune deletes remote-tracking branches whose branch is gone.
	Prune bool
	// Depth deepens or shortens a shallow history to that many commits.
	Depth int
	// Tags fetches every tag.
	Tags bool
}

// Fetch downloads commits and refs from a remote.
func (r *Repo) Fetch(ctx context.Context, opts FetchOptions) error {
	if _, ok, err := r.delegated(ctx, Call{Op: OpFetch, Fetch: opts}); ok {
		return err
	}

	remote, errs := checkRemote(opts.Remote, opts.Refspecs)
	if opts.Depth < 0 {
		errs = append(errs, execbox.Invalid("depth", "must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return r.fetch(ctx, "fetch", remote, opts)
}

func (r *Repo) fetch(ctx context.Context, op, remote string, opts FetchOptions) error {
	urls, err := r.remoteURLs(ctx, remote, false)
	if err != nil {
		return err
	}
	// Auto-gc would start "git gc" (and its hooks) with the token in
	// its environment; it runs on the next local command instead.
	args := []string{"fetch", "--quiet", "--no-auto-gc"}
	if opts.Prune {
		args = append(args, "--prune")
	}
	if opts.Depth > 0 {
		args = append(args, "--depth", fmt.Sprint(opts.Depth))
	}
	if opts.Tags {
		args = append(args, "--tags")
	}
	args = append(args, remote)
	args = append(args, opts.Refspecs...)
	_, err = r.git(ctx, call{op: op, args: args, urls: urls, remote: remote, locks: true})
	return err
}

// PullOptions for Repo.Pull.
type PullOptions struct {
	// Remote is a remote's name or a URL. Empty means "origin".
	Remote string
	// Branch is the remote branch to merge. Empty means the current
	// branch's upstream.
	Branch string
	// Rebase rebases the current branch onto the fetched one instead of
	// merging.
	Rebase bool
	// FFOnly refuses anything but a fast-forward.
	FFOnly bool
	// Identity commits the merge (or rebased commits). Nil means
	// Options.Identity, else the repository's own config.
	Identity *Signature
}

// Pull fetches from a remote and merges (or rebases onto) a branch. It is
// two git commands: the fetch carries the credentials, the merge, which
// may run programs the repository's config names (merge drivers,
// filters), does not. Conflicts are ErrConflict and leave the merge in
// progress: resolve and Commit, or AbortMerge.
func (r *Repo) Pull(ctx context.Context, opts PullOptions) error {
	if _, ok, err := r.delegated(ctx, Call{Op: OpPull, Pull: opts}); ok {
		return err
	}

	remote, errs := checkRemote(opts.Remote, nil)
	if opts.Branch != "" {
		errs = append(errs, checkRef("branch", opts.Branch))
	}
	if opts.Rebase && opts.FFOnly {
		errs = append(errs, execbox.Invalid("ff_only", "cannot be set together with rebase"))
	}
	id := opts.Identity
	if id == nil {
		id = r.c.opts.Identity
	} else {
		errs = append(errs, id.validate("identity")...)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fo := FetchOptions{}
	target := "@{upstream}"
	if opts.Branch != "" {
		fo.Refspecs = []string{opts.Branch}
		target = "FETCH_HEAD"
	}
	if err := r.fetch(ctx, "pull", remote, fo); err != nil {
		return err
	}
	var args []string
	switch {
	case opts.Rebase:
		args = []string{"rebase", "--quiet", target}
	case opts.FFOnly:
		args = []string{"merge", "--quiet", "--ff-only", "--no-edit", target}
	default:
		args = []string{"merge", "--quiet", "--no-edit", target}
	}
	_, err := r.git(ctx, call{op: "pull", args: args, author: id, committer: id, locks: true})
	return r.withConflicts(ctx, err)
}

// MergeOptions for Repo.Merge.
type MergeOptions struct {
	// Rev is the branch or commit to merge into the current branch.
	// Required.
	Rev string
	// FFOnly refuses anything but a fast-forward.
	FFOnly bool
	// NoFF always records a merge commit.
	NoFF bool
	// Message of the merge commit. Empty means git's default.
	Message string
	// Identity commits the merge. Nil means Options.Identity, else the
	// repository's own config.
	Identity *Signature
}

// Merge merges a revision into the current branch. Conflicts are
// ErrConflict and leave the merge in progress.
func (r *Repo) Merge(ctx context.Context, opts MergeOptions) error {
	errs := []error{checkRef("rev", opts.Rev)}
	if opts.FFOnly && opts.NoFF {
		errs = append(errs, execbox.Invalid("no_ff", "cannot be set together with ff_only"))
	}
	if strings.IndexByte(opts.Message, 0) >= 0 {
		errs = append(errs, execbox.Invalid("message", "contains a NUL byte"))
	}
	id := opts.Identity
	if id == nil {
		id = r.c.opts.Identity
	} else {
		errs = append(errs, id.validate("identity")...)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	args := []string{"merge", "--quiet", "--no-edit"}
	if opts.FFOnly {
		args = append(args, "--ff-only")
	}
	if opts.NoFF {
		args = append(args, "--no-ff")
	}
	if opts.Message != "" {
		args = append(args, "--message="+opts.Message)
	}
	args = append(args, "--end-of-options", opts.Rev)
	_, err := r.git(ctx, call{op: "merge", args: args, author: id, committer: id, locks: true})
	return r.withConflicts(ctx, err)
}

// AbortMerge abandons a merge or rebase in progress and restores the
// state before it.
func (r *Repo) AbortMerge(ctx context.Context) error {
	_, err := r.git(ctx, call{op: "abort", args: []string{"merge", "--abort"}, locks: true})
	if err == nil {
		return nil
	}
	if _, rerr := r.git(ctx, call{op: "abort", args: []string{"rebase", "--abort"}, locks: true}); rerr == nil {
		return nil
	}
	return err
}

// withConflicts fills Error.Conflicts from the index when err is a
// conflict.
func (r *Repo) withConflicts(ctx context.Context, err error) error {
	var ge *Error
	if !errors.As(err, &ge) || ge.Kind != ErrConflict {
		return err
	}
	res, qerr := r.git(ctx, call{op: "conflicts", args: []string{"diff", "--name-only", "--diff-filter=U", "-z"}})
	if qerr == nil {
		ge.Conflicts = splitNUL(string(res.Stdout.Data))
	}
	return err
}

// remoteURLs returns the URLs a command talking to remote reaches, for
// deciding whether the credentials go with it. Without credentials it
// asks nothing.
func (r *Repo) remoteURLs(ctx context.Context, remote string, push bool) ([]string, error) {
	if r.c.auth == nil {
		return nil, nil
	}
	if push {
		res, err := r.git(ctx, call{op: "push", args: []string{"remote", "get-url", "--push", "--all", remote}})
		var ge *Error
		switch {
		case err == nil:
			return strings.Fields(string(res.Stdout.Data)), nil
		case !errors.As(err, &ge) || ge.Kind != execbox.ErrNotFound:
			return nil, err
		}
		// Not a configured remote: a URL.
	}
	// Names and URLs alike, insteadOf rules applied, without network.
	res, err := r.git(ctx, call{op: "fetch", args: []string{"ls-remote", "--get-url", remote}})
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(res.Stdout.Data)), nil
}

// DiffOptions for Repo.Diff.
type DiffOptions struct {
	// From is the revision to compare from. Empty means the index (or,
	// with Staged, HEAD).
	From string
	// To is the revision to compare to. Empty means the working tree (or,
	// with Staged, the index).
	To string
	// Staged compares the index with From (default HEAD): what Commit
	// would record.
	Staged bool
	// Paths limit the diff to these pathspecs.
	Paths []string
	// Context is the number of context lines. Zero means git's default (3).
	Context int
}

// Diff is the difference between two trees.
type Diff struct {
	// Files lists the changed files with line counts.
	Files []FileDiff
	// Patch is the unified diff.
	Patch string
	// Truncated reports that the patch was longer than the output limit:
	// Patch holds its beginning and end.
	Truncated bool
}

// FileDiff is one changed file in a Diff.
type FileDiff struct {
	// Path of the file (after the change).
	Path string
	// OrigPath is the path before a rename or copy, else "".
	OrigPath string
	// Added and Deleted count lines; both are 0 for a binary file.
	Added   int
	Deleted int
	// Binary reports a file git does not diff as text.
	Binary bool
}

// Diff compares two trees (working tree, index or commits). Files not
// tracked by git are not in it: see Status.
func (r *Repo) Diff(ctx context.Context, opts DiffOptions) (Diff, error) {
	if rep, ok, err := r.delegated(ctx, Call{Op: OpDiff, Diff: opts}); ok {
		return deref(rep.Diff), err
	}

	var errs []error
	if opts.From != "" {
		errs = append(errs, checkRef("from", opts.From))
	}
	if opts.To != "" {
		errs = append(errs, checkRef("to", opts.To))
		if opts.From == "" && !opts.Staged {
			errs = append(errs, execbox.Invalid("to", "needs from"))
		}
		if opts.Staged {
			errs = append(errs, execbox.Invalid("to", "cannot be set together with staged"))
		}
	}
	if opts.Context < 0 {
		errs = append(errs, execbox.Invalid("context", "must not be negative"))
	}
	errs = append(errs, checkPaths("paths", opts.Paths))
	if err := errors.Join(errs...); err != nil {
		return Diff{}, err
	}
	base := []string{"diff", "--no-color", "--no-ext-diff", "--find-renames"}
	if opts.Context > 0 {
		base = append(base, fmt.Sprintf("--unified=%d", opts.Context))
	}
	if opts.Staged {
		base = append(base, "--cached")
	}
	var revs []string
	if opts.From != "" {
		revs = append(revs, opts.From)
	}
	if opts.To != "" {
		revs = append(revs, opts.To)
	}
	tail := append(append([]string{"--end-of-options"}, revs...), "--")
	tail = append(tail, opts.Paths...)

	stat, err := r.git(ctx, call{op: "diff", args: concat(base, []string{"--numstat", "-z"}, tail), parsed: true})
	if err != nil {
		return Diff{}, err
	}
	d := Diff{Files: parseNumstat(string(stat.Stdout.Data))}
	patch, err := r.git(ctx, call{op: "diff", args: concat(base, []string{"--patch"}, tail)})
	if err != nil {
		return Diff{}, err
	}
	d.Patch = patch.Stdout.Text()
	d.Truncated = patch.Stdout.Truncated()
	return d, nil
}

// parseNumstat parses git diff --numstat -z: "ADDED\tDELETED\tPATH\0", or
// for a rename "ADDED\tDELETED\t\0ORIG\0PATH\0"; "-" counts mean binary.
func parseNumstat(out string) []FileDiff {
	var files []FileDiff
	f := splitNUL(out)
	for i := 0; i < len(f); i++ {
		parts := strings.SplitN(f[i], "\t", 3)
		if len(parts) != 3 {
			continue
		}
		fd := FileDiff{Path: parts[2]}
		if parts[0] == "-" && parts[1] == "-" {
			fd.Binary = true
		} else {
			fd.Added, fd.Deleted = atoi(parts[0]), atoi(parts[1])
		}
		if fd.Path == "" && i+2 < len(f) {
			fd.OrigPath, fd.Path = f[i+1], f[i+2]
			i += 2
		}
		files = append(files, fd)
	}
	return files
}

// ExecOptions for Repo.Exec.
type ExecOptions struct {
	// Args are git's arguments, after "git". Required.
	Args []string
	// Stdin, if set, is git's standard input.
	Stdin io.Reader
	// Timeout bounds the command; zero means Options.Timeout.
	Timeout time.Duration
}

// Exec runs any git command in the repository, with the same isolation
// from host config as every other method but never with the credentials.
// As with execbox.Sandbox.Exec, what git did (a non-zero exit included)
// is in the Result, redacted; an error means it could not run.
func (r *Repo) Exec(ctx context.Context, opts ExecOptions) (execbox.Result, error) {
	if len(opts.Args) == 0 {
		return execbox.Result{}, execbox.Invalid("args", "is required")
	}
	if opts.Timeout < 0 {
		return execbox.Result{}, execbox.Invalid("timeout", "must not be negative")
	}
	res, err := r.git(ctx, call{op: "exec", args: opts.Args, stdin: opts.Stdin, timeout: opts.Timeout, locks: true})
	var ge *Error
	if errors.As(err, &ge) {
		return res, nil
	}
	return res, err
}

// checkPaths refuses pathspecs git could take for options (they follow
// "--", so this is belt and braces) and NUL bytes.
func checkPaths(field string, paths []string) error {
	var errs []error
	for i, p := range paths {
		switch {
		case p == "":
			errs = append(errs, execbox.Invalid(fmt.Sprintf("%s[%d]", field, i), "is empty"))
		case strings.IndexByte(p, 0) >= 0:
			errs = append(errs, execbox.Invalid(fmt.Sprintf("%s[%d]", field, i), "contains a NUL byte"))
		}
	}
	return errors.Join(errs...)
}

func splitNUL(s string) []string {
	s = strings.TrimSuffix(s, "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// checkRemote returns remote, "origin" when empty, and the problems of it
// and of refspecs, named "remote" and "refspecs[i]".
func checkRemote(remote string, refspecs []string) (string, []error) {
	if remote == "" {
		remote = "origin"
	}
	errs := []error{checkRef("remote", remote)}
	for i, s := range refspecs {
		errs = append(errs, checkRef(fmt.Sprintf("refspecs[%d]", i), s))
	}
	return remote, errs
}
