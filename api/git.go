package api

import (
	"cmp"
	"time"

	"github.com/execbox/execbox/git"
)

// GitSettings are the fields every POST git/{op} body has besides its
// operation's own: the repository and the git.Options that travel.
type GitSettings struct {
	// Dir is the repository's directory relative to the workspace; empty
	// means the workspace. Init and clone name theirs in "path" instead.
	Dir string `json:"dir,omitempty"`
	// Identity authors and commits what git records for the caller.
	Identity *GitSignature `json:"identity,omitempty"`
	// Credentials authenticate HTTP(S) remotes under their URL. The
	// token is never logged, echoed or written to the repository.
	Credentials *GitCredentials `json:"credentials,omitempty"`
	// TimeoutMS bounds each git command (a clone's whole clone).
	TimeoutMS float64 `json:"timeout_ms,omitempty"`
	// OutputLimit caps the bytes kept per stream of each git command.
	OutputLimit int64 `json:"output_limit,omitempty"`
}

// GitSignature is git.Signature on the wire.
type GitSignature struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// GitCredentials are git.Credentials on the wire.
type GitCredentials struct {
	URL      string `json:"url"`
	Username string `json:"username,omitempty"`
	Token    string `json:"token"`
	Bearer   bool   `json:"bearer,omitempty"`
}

// The bodies of POST git/{op}, one per operation, each with the
// GitSettings.
type (
	GitInitRequest struct {
		GitSettings
		Path   string `json:"path,omitempty"`
		Branch string `json:"branch,omitempty"`
		Bare   bool   `json:"bare,omitempty"`
	}
	GitCloneRequest struct {
		GitSettings
		URL          string `json:"url"`
		Path         string `json:"path,omitempty"`
		Branch       string `json:"branch,omitempty"`
		Depth        int    `json:"depth,omitempty"`
		SingleBranch bool   `json:"single_branch,omitempty"`
		NoCheckout   bool   `json:"no_checkout,omitempty"`
	}
	GitStatusRequest struct {
		GitSettings
		Untracked git.UntrackedMode `json:"untracked,omitempty"`
		Paths     []string          `json:"paths,omitempty"`
	}
	GitDiffRequest struct {
		GitSettings
		From    string   `json:"from,omitempty"`
		To      string   `json:"to,omitempty"`
		Staged  bool     `json:"staged,omitempty"`
		Paths   []string `json:"paths,omitempty"`
		Context int      `json:"context,omitempty"`
	}
	GitLogRequest struct {
		GitSettings
		Rev      string   `json:"rev,omitempty"`
		MaxCount int      `json:"max_count,omitempty"`
		Skip     int      `json:"skip,omitempty"`
		Paths    []string `json:"paths,omitempty"`
	}
	GitAddRequest struct {
		GitSettings
		Paths []string `json:"paths,omitempty"`
		All   bool     `json:"all,omitempty"`
	}
	GitCommitRequest struct {
		GitSettings
		Message    string        `json:"message"`
		Author     *GitSignature `json:"author,omitempty"`
		Committer  *GitSignature `json:"committer,omitempty"`
		All        bool          `json:"all,omitempty"`
		AllowEmpty bool          `json:"allow_empty,omitempty"`
		Amend      bool          `json:"amend,omitempty"`
		NoVerify   bool          `json:"no_verify,omitempty"`
	}
	GitCheckoutRequest struct {
		GitSettings
		Branch     string `json:"branch"`
		Create     bool   `json:"create,omitempty"`
		StartPoint string `json:"start_point,omitempty"`
		Detach     bool   `json:"detach,omitempty"`
		Force      bool   `json:"force,omitempty"`
	}
	GitPushRequest struct {
		GitSettings
		Remote      string   `json:"remote,omitempty"`
		Refspecs    []string `json:"refspecs,omitempty"`
		SetUpstream bool     `json:"set_upstream,omitempty"`
		Force       bool     `json:"force,omitempty"`
		Tags        bool     `json:"tags,omitempty"`
	}
	GitFetchRequest struct {
		GitSettings
		Remote   string   `json:"remote,omitempty"`
		Refspecs []string `json:"refspecs,omitempty"`
		Prune    bool     `json:"prune,omitempty"`
		Depth    int      `json:"depth,omitempty"`
		Tags     bool     `json:"tags,omitempty"`
	}
	GitPullRequest struct {
		GitSettings
		Remote string `json:"remote,omitempty"`
		Branch string `json:"branch,omitempty"`
		Rebase bool   `json:"rebase,omitempty"`
		FFOnly bool   `json:"ff_only,omitempty"`
	}
	GitWorktreesRequest struct {
		GitSettings
	}
	GitAddWorktreeRequest struct {
		GitSettings
		Path     string `json:"path"`
		Branch   string `json:"branch,omitempty"`
		Existing bool   `json:"existing,omitempty"`
		Base     string `json:"base,omitempty"`
		Detach   bool   `json:"detach,omitempty"`
	}
	GitRemoveWorktreeRequest struct {
		GitSettings
		Path         string `json:"path"`
		Force        bool   `json:"force,omitempty"`
		DeleteBranch bool   `json:"delete_branch,omitempty"`
	}
)

// GitRequest is the body of one operation: it becomes a git.Call.
type GitRequest interface {
	settings() *GitSettings
	fill(c *git.Call)
}

func (r *GitSettings) settings() *GitSettings { return r }

func (r *GitInitRequest) fill(c *git.Call) {
	c.Init = git.InitOptions{Path: r.Path, Branch: r.Branch, Bare: r.Bare}
}
func (r *GitCloneRequest) fill(c *git.Call) {
	c.Clone = git.CloneOptions{URL: r.URL, Path: r.Path, Branch: r.Branch, Depth: r.Depth, SingleBranch: r.SingleBranch, NoCheckout: r.NoCheckout}
}
func (r *GitStatusRequest) fill(c *git.Call) {
	c.Status = git.StatusOptions{Untracked: r.Untracked, Paths: r.Paths}
}
func (r *GitDiffRequest) fill(c *git.Call) {
	c.Diff = git.DiffOptions{From: r.From, To: r.To, Staged: r.Staged, Paths: r.Paths, Context: r.Context}
}
func (r *GitLogRequest) fill(c *git.Call) {
	c.Log = git.LogOptions{Rev: r.Rev, MaxCount: r.MaxCount, Skip: r.Skip, Paths: r.Paths}
}
func (r *GitAddRequest) fill(c *git.Call) { c.Add = git.AddOptions{Paths: r.Paths, All: r.All} }
func (r *GitCommitRequest) fill(c *git.Call) {
	c.Commit = git.CommitOptions{Message: r.Message, Author: r.Author.signature(), Committer: r.Committer.signature(),
		All: r.All, AllowEmpty: r.AllowEmpty, Amend: r.Amend, NoVerify: r.NoVerify}
}
func (r *GitCheckoutRequest) fill(c *git.Call) {
	c.Checkout = git.CheckoutOptions{Branch: r.Branch, Create: r.Create, StartPoint: r.StartPoint, Detach: r.Detach, Force: r.Force}
}
func (r *GitPushRequest) fill(c *git.Call) {
	c.Push = git.PushOptions{Remote: r.Remote, Refspecs: r.Refspecs, SetUpstream: r.SetUpstream, Force: r.Force, Tags: r.Tags}
}
func (r *GitFetchRequest) fill(c *git.Call) {
	c.Fetch = git.FetchOptions{Remote: r.Remote, Refspecs: r.Refspecs, Prune: r.Prune, Depth: r.Depth, Tags: r.Tags}
}
func (r *GitPullRequest) fill(c *git.Call) {
	c.Pull = git.PullOptions{Remote: r.Remote, Branch: r.Branch, Rebase: r.Rebase, FFOnly: r.FFOnly}
}
func (r *GitWorktreesRequest) fill(*git.Call) {}
func (r *GitAddWorktreeRequest) fill(c *git.Call) {
	c.AddWorktree = git.AddWorktreeOptions{Path: r.Path, Branch: r.Branch, Existing: r.Existing, Base: r.Base, Detach: r.Detach}
}
func (r *GitRemoveWorktreeRequest) fill(c *git.Call) {
	c.RemoveWorktree = git.RemoveWorktreeOptions{Path: r.Path, Force: r.Force, DeleteBranch: r.DeleteBranch}
}

// NewGitRequestFor returns an empty body of op to decode into, or nil
// for an unknown op.
func NewGitRequestFor(op string) GitRequest {
	switch op {
	case git.OpInit:
		return &GitInitRequest{}
	case git.OpClone:
		return &GitCloneRequest{}
	case git.OpStatus:
		return &GitStatusRequest{}
	case git.OpDiff:
		return &GitDiffRequest{}
	case git.OpLog:
		return &GitLogRequest{}
	case git.OpAdd:
		return &GitAddRequest{}
	case git.OpCommit:
		return &GitCommitRequest{}
	case git.OpCheckout:
		return &GitCheckoutRequest{}
	case git.OpPush:
		return &GitPushRequest{}
	case git.OpFetch:
		return &GitFetchRequest{}
	case git.OpPull:
		return &GitPullRequest{}
	case git.OpWorktrees:
		return &GitWorktreesRequest{}
	case git.OpAddWorktree:
		return &GitAddWorktreeRequest{}
	case git.OpRemoveWorktree:
		return &GitRemoveWorktreeRequest{}
	}
	return nil
}

// GitCall returns the git.Call of op with body r (from NewGitRequestFor
// op). It checks what the wire adds (the timeout's range); git checks
// the rest when the call runs.
func GitCall(op string, r GitRequest) (git.Call, error) {
	s := r.settings()
	timeout, err := duration("timeout", s.TimeoutMS)
	c := git.Call{Op: op, Dir: s.Dir, Identity: s.Identity.signature(), Timeout: timeout, OutputLimit: s.OutputLimit}
	if cr := s.Credentials; cr != nil {
		c.Credentials = &git.Credentials{URL: cr.URL, Username: cr.Username, Token: cr.Token, Bearer: cr.Bearer}
	}
	r.fill(&c)
	return c, err
}

// NewGitRequest returns the body of c for the wire. A clone's own
// timeout and a pull's own identity travel as the settings' (the only
// command they would differ for is theirs).
func NewGitRequest(c git.Call) GitRequest {
	r := NewGitRequestFor(c.Op)
	if r == nil {
		return nil
	}
	timeout, id := c.Timeout, c.Identity
	switch c.Op {
	case git.OpClone:
		timeout = cmp.Or(c.Clone.Timeout, timeout)
	case git.OpPull:
		id = cmp.Or(c.Pull.Identity, id)
	}
	*r.settings() = GitSettings{Dir: c.Dir, Identity: newGitSignature(id), TimeoutMS: millis(timeout), OutputLimit: c.OutputLimit}
	if cr := c.Credentials; cr != nil {
		r.settings().Credentials = &GitCredentials{URL: cr.URL, Username: cr.Username, Token: cr.Token, Bearer: cr.Bearer}
	}
	switch w := r.(type) {
	case *GitInitRequest:
		o := c.Init
		w.Path, w.Branch, w.Bare = o.Path, o.Branch, o.Bare
	case *GitCloneRequest:
		o := c.Clone
		w.URL, w.Path, w.Branch, w.Depth, w.SingleBranch, w.NoCheckout = o.URL, o.Path, o.Branch, o.Depth, o.SingleBranch, o.NoCheckout
	case *GitStatusRequest:
		w.Untracked, w.Paths = c.Status.Untracked, c.Status.Paths
	case *GitDiffRequest:
		o := c.Diff
		w.From, w.To, w.Staged, w.Paths, w.Context = o.From, o.To, o.Staged, o.Paths, o.Context
	case *GitLogRequest:
		o := c.Log
		w.Rev, w.MaxCount, w.Skip, w.Paths = o.Rev, o.MaxCount, o.Skip, o.Paths
	case *GitAddRequest:
		w.Paths, w.All = c.Add.Paths, c.Add.All
	case *GitCommitRequest:
		o := c.Commit
		w.Message, w.Author, w.Committer = o.Message, newGitSignature(o.Author), newGitSignature(o.Committer)
		w.All, w.AllowEmpty, w.Amend, w.NoVerify = o.All, o.AllowEmpty, o.Amend, o.NoVerify
	case *GitCheckoutRequest:
		o := c.Checkout
		w.Branch, w.Create, w.StartPoint, w.Detach, w.Force = o.Branch, o.Create, o.StartPoint, o.Detach, o.Force
	case *GitPushRequest:
		o := c.Push
		w.Remote, w.Refspecs, w.SetUpstream, w.Force, w.Tags = o.Remote, o.Refspecs, o.SetUpstream, o.Force, o.Tags
	case *GitFetchRequest:
		o := c.Fetch
		w.Remote, w.Refspecs, w.Prune, w.Depth, w.Tags = o.Remote, o.Refspecs, o.Prune, o.Depth, o.Tags
	case *GitPullRequest:
		o := c.Pull
		w.Remote, w.Branch, w.Rebase, w.FFOnly = o.Remote, o.Branch, o.Rebase, o.FFOnly
	case *GitAddWorktreeRequest:
		o := c.AddWorktree
		w.Path, w.Branch, w.Existing, w.Base, w.Detach = o.Path, o.Branch, o.Existing, o.Base, o.Detach
	case *GitRemoveWorktreeRequest:
		o := c.RemoveWorktree
		w.Path, w.Force, w.DeleteBranch = o.Path, o.Force, o.DeleteBranch
	}
	return r
}

func newGitSignature(s *git.Signature) *GitSignature {
	if s == nil {
		return nil
	}
	return &GitSignature{Name: s.Name, Email: s.Email}
}

func (s *GitSignature) signature() *git.Signature {
	if s == nil {
		return nil
	}
	return &git.Signature{Name: s.Name, Email: s.Email}
}

// GitReply is the body of a POST git/{op} that ran: the field of the
// operation is set (dir for init, clone and worktree_add; hash for
// commit; status, diff, log or worktrees), or Error when a git command
// ran and failed. Like an exec's exit code, that failure is data (status
// 200); a request that could not run (invalid fields, no such sandbox)
// is an error response as everywhere else.
type GitReply struct {
	Error     *GitFailure   `json:"error,omitempty"`
	Dir       string        `json:"dir,omitempty"`
	Hash      string        `json:"hash,omitempty"`
	Status    *GitStatus    `json:"status,omitempty"`
	Diff      *GitDiff      `json:"diff,omitempty"`
	Log       []GitCommit   `json:"log,omitempty"`
	Worktrees []GitWorktree `json:"worktrees,omitempty"`
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// GitStatus is git.Status on the wire. Its lists are empty arrays, never
// null.
type GitStatus struct {
	Commit       string          `json:"commit"`
	Branch       string          `json:"branch"`
	Detached     bool            `json:"detached"`
	Upstream     string          `json:"upstream,omitempty"`
	UpstreamGone bool            `json:"upstream_gone,omitempty"`
	Ahead        int             `json:"ahead"`
	Behind       int             `json:"behind"`
	Staged       []GitFileStatus `json:"staged"`
	Unstaged     []GitFileStatus `json:"unstaged"`
	Untracked    []string        `json:"untracked"`
	Conflicts    []GitConflict   `json:"conflicts"`
}

// GitFileStatus is git.FileStatus on the wire.
type GitFileStatus struct {
	Path     string     `json:"path"`
	OrigPath string     `json:"orig_path,omitempty"`
	Change   git.Change `json:"change"`
}

// GitConflict is git.Conflict on the wire.
type GitConflict struct {
	Path string           `json:"path"`
	Kind git.ConflictKind `json:"kind"`
}

// GitDiff is git.Diff on the wire. Files is an array, never null.
type GitDiff struct {
	Files     []GitFileDiff `json:"files"`
	Patch     string        `json:"patch"`
	Truncated bool          `json:"truncated,omitempty"`
}

// GitFileDiff is git.FileDiff on the wire.
type GitFileDiff struct {
	Path     string `json:"path"`
	OrigPath string `json:"orig_path,omitempty"`
	Added    int    `json:"added"`
	Deleted  int    `json:"deleted"`
	Binary   bool   `json:"binary,omitempty"`
}

// GitCommit is git.Commit on the wire.
type GitCommit struct {
	Hash       string       `json:"hash"`
	Parents    []string     `json:"parents"`
	Author     GitSignature `json:"author"`
	AuthorTime time.Time    `json:"author_time"`
	Committer  GitSignature `json:"committer"`
	CommitTime time.Time    `json:"commit_time"`
	Subject    string       `json:"subject"`
	Message    string       `json:"message"`
}

// GitWorktree is git.Worktree on the wire.
type GitWorktree struct {
	Path           string `json:"path"`
	Head           string `json:"head,omitempty"`
	Branch         string `json:"branch,omitempty"`
	Main           bool   `json:"main,omitempty"`
	Bare           bool   `json:"bare,omitempty"`
	Detached       bool   `json:"detached,omitempty"`
	Locked         bool   `json:"locked,omitempty"`
	LockReason     string `json:"lock_reason,omitempty"`
	Prunable       bool   `json:"prunable,omitempty"`
	PrunableReason string `json:"prunable_reason,omitempty"`
}

// NewGitReply returns r for the wire.
func NewGitReply(r git.Reply) GitReply {
	out := GitReply{Dir: r.Dir, Hash: r.Hash}
	if r.Status != nil {
		out.Status = NewGitStatus(r.Status)
	}
	if r.Diff != nil {
		out.Diff = NewGitDiff(r.Diff)
	}
	for _, c := range r.Log {
		out.Log = append(out.Log, GitCommit{Hash: c.Hash, Parents: c.Parents, Author: GitSignature(c.Author), AuthorTime: c.AuthorTime,
			Committer: GitSignature(c.Committer), CommitTime: c.CommitTime, Subject: c.Subject, Message: c.Message})
	}
	for _, w := range r.Worktrees {
		out.Worktrees = append(out.Worktrees, GitWorktree(w))
	}
	return out
}

// NewGitStatus returns s for the wire (and for execbox git status
// --json): its lists are empty arrays, never null.
func NewGitStatus(s *git.Status) *GitStatus {
	out := &GitStatus{Commit: s.Commit, Branch: s.Branch, Detached: s.Detached, Upstream: s.Upstream,
		UpstreamGone: s.UpstreamGone, Ahead: s.Ahead, Behind: s.Behind, Untracked: append([]string{}, s.Untracked...),
		Staged: newFileStatuses(s.Staged), Unstaged: newFileStatuses(s.Unstaged), Conflicts: []GitConflict{}}
	for _, c := range s.Conflicts {
		out.Conflicts = append(out.Conflicts, GitConflict(c))
	}
	return out
}

// NewGitDiff returns d for the wire (and for execbox git diff --json):
// Files is an empty array, never null.
func NewGitDiff(d *git.Diff) *GitDiff {
	out := &GitDiff{Files: []GitFileDiff{}, Patch: d.Patch, Truncated: d.Truncated}
	for _, f := range d.Files {
		out.Files = append(out.Files, GitFileDiff(f))
	}
	return out
}

func newFileStatuses(fs []git.FileStatus) []GitFileStatus {
	out := []GitFileStatus{}
	for _, f := range fs {
		out = append(out, GitFileStatus(f))
	}
	return out
}

// Reply returns r as a git.Reply.
func (r GitReply) Reply() git.Reply {
	out := git.Reply{Dir: r.Dir, Hash: r.Hash}
	if s := r.Status; s != nil {
		out.Status = &git.Status{Commit: s.Commit, Branch: s.Branch, Detached: s.Detached, Upstream: s.Upstream,
			UpstreamGone: s.UpstreamGone, Ahead: s.Ahead, Behind: s.Behind, Untracked: nilIfEmpty(s.Untracked),
			Staged: fileStatuses(s.Staged), Unstaged: fileStatuses(s.Unstaged)}
		for _, c := range s.Conflicts {
			out.Status.Conflicts = append(out.Status.Conflicts, git.Conflict(c))
		}
	}
	if d := r.Diff; d != nil {
		out.Diff = &git.Diff{Patch: d.Patch, Truncated: d.Truncated}
		for _, f := range d.Files {
			out.Diff.Files = append(out.Diff.Files, git.FileDiff(f))
		}
	}
	for _, c := range r.Log {
		out.Log = append(out.Log, git.Commit{Hash: c.Hash, Parents: c.Parents, Author: git.Signature(c.Author), AuthorTime: c.AuthorTime,
			Committer: git.Signature(c.Committer), CommitTime: c.CommitTime, Subject: c.Subject, Message: c.Message})
	}
	for _, w := range r.Worktrees {
		out.Worktrees = append(out.Worktrees, git.Worktree(w))
	}
	return out
}

func fileStatuses(fs []GitFileStatus) []git.FileStatus {
	var out []git.FileStatus
	for _, f := range fs {
		out = append(out, git.FileStatus(f))
	}
	return out
}

// GitFailure is a *git.Error on the wire.
type GitFailure struct {
	// Code is the error code of Kind where it has one (not_found,
	// permission_denied, unavailable), else empty.
	Code Code `json:"code,omitempty"`
	// Op is the operation that failed ("push", "worktree add", ...).
	Op   string   `json:"op"`
	Dir  string   `json:"dir,omitempty"`
	Args []string `json:"args,omitempty"`
	// Kind classifies the failure: not_repository, conflict,
	// authentication, unreachable, rejected, nothing_to_commit,
	// local_changes, exists, not_found; empty when unclassified.
	Kind      string   `json:"kind,omitempty"`
	Message   string   `json:"message"`
	Conflicts []string `json:"conflicts,omitempty"`
	// Result is what the git command did; absent when the operation
	// failed before running one (a directory that is not there).
	Result *Result `json:"result,omitempty"`
}

// NewGitFailure returns e for the wire.
func NewGitFailure(e *git.Error) *GitFailure {
	var code Code
	if c := CodeOf(e); c != CodeInternal {
		code = c
	}
	f := &GitFailure{Code: code, Op: e.Op, Dir: e.Dir, Args: e.Args, Kind: git.KindName(e.Kind), Message: e.Message,
		Conflicts: e.Conflicts}
	if e.Result.Reason != "" {
		r := NewResult(e.Result)
		f.Result = &r
	}
	return f
}

// Err returns f as the *git.Error it came from.
func (f *GitFailure) Err() *git.Error {
	e := &git.Error{Op: f.Op, Dir: f.Dir, Args: f.Args, Kind: git.KindNamed(f.Kind), Message: f.Message,
		Conflicts: f.Conflicts}
	if f.Result != nil {
		e.Result = f.Result.Result()
	}
	return e
}
