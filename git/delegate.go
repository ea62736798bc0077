package git

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/execbox/execbox"
)

// Delegate is implemented by sandboxes that can run a whole git
// operation where they are, in one call: client.Sandbox (and so the
// remote runtime's sandboxes, and the agent-backed ones of the sandbox
// and docker runtimes) sends it as POST git/{op} to the execbox server or
// agent, which runs it with Do there. An operation otherwise takes one
// round trip per git command (Diff two, Push three, Clone one and a
// check).
//
// Repo and Client methods use a Delegate when the Client's Options hold
// nothing a Call cannot carry (see Call): the result, and the error (an
// *Error with its kind, or a *execbox.FieldError), are then the ones the
// method returns in process.
type Delegate interface {
	RunGit(ctx context.Context, call Call) (Reply, error)
}

// ErrNotDelegated is returned by a Delegate that cannot run a Call in
// one request (its server predates POST git/{op}); the operation then
// runs command by command through the Sandbox interface.
var ErrNotDelegated = errors.New("git: the sandbox cannot run an operation in one call")

// The operations a Call runs.
const (
	OpInit           = "init"
	OpClone          = "clone"
	OpStatus         = "status"
	OpDiff           = "diff"
	OpLog            = "log"
	OpAdd            = "add"
	OpCommit         = "commit"
	OpCheckout       = "checkout"
	OpPush           = "push"
	OpFetch          = "fetch"
	OpPull           = "pull"
	OpWorktrees      = "worktrees"
	OpAddWorktree    = "worktree_add"
	OpRemoveWorktree = "worktree_remove"
)

// Ops lists every operation a Call runs.
var Ops = []string{OpInit, OpClone, OpStatus, OpDiff, OpLog, OpAdd, OpCommit, OpCheckout,
	OpPush, OpFetch, OpPull, OpWorktrees, OpAddWorktree, OpRemoveWorktree}

// Call is one git operation with the Client settings it needs: what a
// Delegate sends. Only the settings below travel; a Client whose Options
// set Git, Home, EnvPolicy, EnvAllow or Env runs step by step instead.
// The Logger stays with the caller: a delegated operation logs where it
// runs.
type Call struct {
	// Op is one of the Op constants; it says which options field is used.
	Op string
	// Dir is the repository's directory relative to the workspace (every
	// operation but init and clone, whose options name the path).
	Dir string

	Credentials *Credentials
	Identity    *Signature
	Timeout     time.Duration
	OutputLimit int64

	Init           InitOptions
	Clone          CloneOptions
	Status         StatusOptions
	Diff           DiffOptions
	Log            LogOptions
	Add            AddOptions
	Commit         CommitOptions
	Checkout       CheckoutOptions
	Push           PushOptions
	Fetch          FetchOptions
	Pull           PullOptions
	AddWorktree    AddWorktreeOptions
	RemoveWorktree RemoveWorktreeOptions
}

// Reply is what an operation returns; the field of its Op is set.
type Reply struct {
	// Dir is the repository made by init, clone or worktree_add,
	// relative to the workspace.
	Dir       string
	Hash      string // commit
	Status    *Status
	Diff      *Diff
	Log       []Commit
	Worktrees []Worktree
}

// Do runs call in sb as the Client and Repo methods do, and is what a
// server does with a Call it receives.
func Do(ctx context.Context, sb execbox.Sandbox, call Call) (Reply, error) {
	c, err := NewClient(sb, Options{Credentials: call.Credentials, Identity: call.Identity, Timeout: call.Timeout, OutputLimit: call.OutputLimit})
	if err != nil {
		return Reply{}, err
	}
	var rep Reply
	switch call.Op {
	case OpInit, OpClone:
		if call.Dir != "" {
			return Reply{}, execbox.Invalid("dir", "is not used by %s (its path names the directory)", call.Op)
		}
		var r *Repo
		if call.Op == OpInit {
			r, err = c.Init(ctx, call.Init)
		} else {
			r, err = c.Clone(ctx, call.Clone)
		}
		if r != nil {
			rep.Dir = r.Dir()
		}
		return rep, err
	}
	r, err := c.Repo(call.Dir)
	if err != nil {
		return Reply{}, err
	}
	switch call.Op {
	case OpStatus:
		st, err := r.Status(ctx, call.Status)
		return Reply{Status: &st}, err
	case OpDiff:
		d, err := r.Diff(ctx, call.Diff)
		return Reply{Diff: &d}, err
	case OpLog:
		rep.Log, err = r.Log(ctx, call.Log)
	case OpAdd:
		err = r.Add(ctx, call.Add)
	case OpCommit:
		rep.Hash, err = r.Commit(ctx, call.Commit)
	case OpCheckout:
		err = r.Checkout(ctx, call.Checkout)
	case OpPush:
		err = r.Push(ctx, call.Push)
	case OpFetch:
		err = r.Fetch(ctx, call.Fetch)
	case OpPull:
		err = r.Pull(ctx, call.Pull)
	case OpWorktrees:
		rep.Worktrees, err = r.Worktrees(ctx)
	case OpAddWorktree:
		var wt *Repo
		if wt, err = r.AddWorktree(ctx, call.AddWorktree); wt != nil {
			rep.Dir = wt.Dir()
		}
	case OpRemoveWorktree:
		err = r.RemoveWorktree(ctx, call.RemoveWorktree)
	default:
		return Reply{}, execbox.Invalid("op", "unknown git operation %q", call.Op)
	}
	return rep, err
}

// delegated runs call through the sandbox's Delegate, when there is one
// and c's options can travel; ok is false when it did not.
func (c *Client) delegated(ctx context.Context, call Call) (rep Reply, ok bool, err error) {
	d, is := c.sb.(Delegate)
	o := c.opts
	if !is || o.Git != "git" || o.Home != "/nonexistent" || o.EnvPolicy != execbox.EnvClean || o.EnvAllow != nil || o.Env != nil {
		return Reply{}, false, nil
	}
	call.Credentials, call.Identity, call.Timeout, call.OutputLimit = o.Credentials, o.Identity, o.Timeout, o.OutputLimit
	rep, err = d.RunGit(ctx, call)
	if errors.Is(err, ErrNotDelegated) {
		return Reply{}, false, nil
	}
	if err != nil && c.redac != nil {
		err = c.redac.err(err) // what came back is redacted there; and here
	}
	return rep, true, err
}

// kinds names the error kinds for the wire.
var kinds = map[string]error{
	"not_repository": ErrNotRepository, "conflict": ErrConflict, "authentication": ErrAuthentication,
	"unreachable": ErrUnreachable, "rejected": ErrRejected, "nothing_to_commit": ErrNothingToCommit,
	"local_changes": ErrLocalChanges, "exists": ErrExists, "not_found": execbox.ErrNotFound,
}

// KindName returns the name of an Error's Kind ("conflict",
// "nothing_to_commit", ...), "" for none.
func KindName(kind error) string {
	for name, k := range kinds {
		if k == kind {
			return name
		}
	}
	return ""
}

// KindNamed is the inverse of KindName: nil for "" and unknown names.
func KindNamed(name string) error { return kinds[name] }

// String describes a Call for logs and errors, never its credentials.
func (c Call) String() string { return fmt.Sprintf("git %s in %q", c.Op, c.Dir) }

// delegated runs call on r through the sandbox's Delegate (see
// Client.delegated); a Repo with extra config (Parallel's) never does.
func (r *Repo) delegated(ctx context.Context, call Call) (Reply, bool, error) {
	if len(r.cfg) > 0 {
		return Reply{}, false, nil
	}
	call.Dir = r.dir
	return r.c.delegated(ctx, call)
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// repoOf is the Repo a delegated init, clone or worktree_add made.
func (c *Client) repoOf(rep Reply, err error) (*Repo, error) {
	if err != nil {
		return nil, err
	}
	return &Repo{c: c, dir: rep.Dir}, nil
}
