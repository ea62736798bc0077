package git

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/execbox/execbox"
)

// Worktree is one working tree of a repository (git worktree list).
type Worktree struct {
	// Path is the worktree's directory relative to the workspace, or
	// absolute when it lies outside.
	Path string
	// Head is the commit checked out; "" in a bare repository.
	Head string
	// Branch is the branch checked out ("main"); "" when Detached or Bare.
	Branch string
	// Main reports the repository's main working tree (listed first).
	Main bool
	// Bare reports a bare repository's entry.
	Bare bool
	// Detached reports a detached HEAD.
	Detached bool
	// Locked reports a locked worktree (git worktree lock), and why.
	Locked     bool
	LockReason string
	// Prunable reports a worktree whose directory is gone, and why; Prune
	// removes its administrative files.
	Prunable       bool
	PrunableReason string
}

// AddWorktreeOptions for Repo.AddWorktree.
type AddWorktreeOptions struct {
	// Path is the new worktree's directory, relative to the workspace. It
	// must not exist or be empty. Required.
	Path string
	// Branch is the branch the worktree checks out, created from Base;
	// an existing branch is ErrExists unless Existing is set. Required
	// unless Detach.
	Branch string
	// Existing checks out the existing branch Branch instead of creating
	// it. A branch can be checked out in one worktree only.
	Existing bool
	// Base is where a new branch (or a detached HEAD) starts. Empty means
	// HEAD.
	Base string
	// Detach checks out Base with a detached HEAD and no branch.
	Detach bool
}

// AddWorktree adds a working tree (git worktree add) and returns it as a
// Repo. It shares the repository's objects and refs; its branch, index
// and files are its own.
func (r *Repo) AddWorktree(ctx context.Context, opts AddWorktreeOptions) (*Repo, error) {
	if rep, ok, err := r.delegated(ctx, Call{Op: OpAddWorktree, AddWorktree: opts}); ok {
		return r.c.repoOf(rep, err)
	}

	var errs []error
	rel, err := r.c.workspacePath("path", opts.Path)
	switch {
	case err != nil:
		errs = append(errs, err)
	case opts.Path == "" || rel == ".":
		errs = append(errs, execbox.Invalid("path", "is required"))
	}
	switch {
	case opts.Detach && opts.Branch != "":
		errs = append(errs, execbox.Invalid("branch", "cannot be set together with detach"))
	case !opts.Detach:
		errs = append(errs, checkRef("branch", opts.Branch))
	}
	if opts.Base != "" {
		errs = append(errs, checkRef("base", opts.Base))
		if opts.Existing {
			errs = append(errs, execbox.Invalid("base", "cannot be set together with existing"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	args := []string{"worktree", "add", "--quiet"}
	switch {
	case opts.Detach:
		args = append(args, "--detach", r.c.abs(rel))
	case opts.Existing:
		args = append(args, r.c.abs(rel), opts.Branch)
	default:
		args = append(args, "-b", opts.Branch, r.c.abs(rel))
	}
	if opts.Base != "" {
		args = append(args, opts.Base)
	}
	if _, err := r.git(ctx, call{op: "worktree add", args: args, locks: true}); err != nil {
		return nil, err
	}
	return &Repo{c: r.c, dir: rel, cfg: r.cfg}, nil
}

// Worktrees lists the repository's working trees, the main one first.
func (r *Repo) Worktrees(ctx context.Context) ([]Worktree, error) {
	if rep, ok, err := r.delegated(ctx, Call{Op: OpWorktrees}); ok {
		return rep.Worktrees, err
	}

	res, err := r.git(ctx, call{op: "worktree list", args: []string{"worktree", "list", "--porcelain", "-z"}, parsed: true})
	if err != nil {
		return nil, err
	}
	wts := parseWorktrees(string(res.Stdout.Data))
	_, realWS, err := r.top(ctx)
	if err != nil && !errors.Is(err, execbox.ErrPermission) {
		return nil, err
	}
	for i := range wts {
		wts[i].Path = r.c.rel(wts[i].Path, realWS)
	}
	return wts, nil
}

// parseWorktrees parses git worktree list --porcelain -z: attributes
// "worktree PATH", "HEAD HASH", "branch REF", "bare", "detached",
// "locked [REASON]", "prunable [REASON]", each NUL-terminated, and an
// empty attribute after each worktree.
func parseWorktrees(out string) []Worktree {
	var wts []Worktree
	var cur *Worktree
	for _, attr := range strings.Split(out, "\x00") {
		if attr == "" {
			cur = nil
			continue
		}
		key, val, _ := strings.Cut(attr, " ")
		if key == "worktree" {
			wts = append(wts, Worktree{Path: val, Main: len(wts) == 0})
			cur = &wts[len(wts)-1]
			continue
		}
		if cur == nil {
			continue
		}
		switch key {
		case "HEAD":
			cur.Head = val
		case "branch":
			cur.Branch = strings.TrimPrefix(val, "refs/heads/")
		case "bare":
			cur.Bare = true
		case "detached":
			cur.Detached = true
		case "locked":
			cur.Locked, cur.LockReason = true, val
		case "prunable":
			cur.Prunable, cur.PrunableReason = true, val
		}
	}
	return wts
}

// RemoveWorktreeOptions for Repo.RemoveWorktree.
type RemoveWorktreeOptions struct {
	// Path is the worktree's directory, relative to the workspace.
	// Required.
	Path string
	// Force removes it even with uncommitted changes or untracked files,
	// and even when locked.
	Force bool
	// DeleteBranch also deletes the branch the worktree had checked out,
	// merged or not.
	DeleteBranch bool
}

// RemoveWorktree removes a working tree: its directory and its
// administrative files. The main working tree cannot be removed.
func (r *Repo) RemoveWorktree(ctx context.Context, opts RemoveWorktreeOptions) error {
	if _, ok, err := r.delegated(ctx, Call{Op: OpRemoveWorktree, RemoveWorktree: opts}); ok {
		return err
	}

	rel, err := r.c.workspacePath("path", opts.Path)
	if err != nil {
		return err
	}
	if opts.Path == "" {
		return execbox.Invalid("path", "is required")
	}
	var branch string
	if opts.DeleteBranch {
		wts, err := r.Worktrees(ctx)
		if err != nil {
			return err
		}
		for _, wt := range wts {
			if wt.Path == rel {
				branch = wt.Branch
			}
		}
	}
	args := []string{"worktree", "remove"}
	if opts.Force {
		args = append(args, "--force", "--force")
	}
	args = append(args, r.c.abs(rel))
	if _, err := r.git(ctx, call{op: "worktree remove", args: args, locks: true}); err != nil {
		return err
	}
	if branch != "" {
		if _, err := r.git(ctx, call{op: "worktree remove", args: []string{"branch", "--delete", "--force", "--end-of-options", branch}, locks: true}); err != nil {
			return fmt.Errorf("worktree removed, branch kept: %w", err)
		}
	}
	return nil
}

// PruneWorktrees removes the administrative files of worktrees whose
// directory is gone (git worktree prune).
func (r *Repo) PruneWorktrees(ctx context.Context) error {
	_, err := r.git(ctx, call{op: "worktree prune", args: []string{"worktree", "prune"}, locks: true})
	return err
}
