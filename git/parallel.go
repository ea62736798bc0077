package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox"
)

// Mode says how Parallel runs its tasks.
type Mode string

// Modes. Config key execution.mode.
const (
	// ModeParallel runs up to MaxConcurrent tasks at once. The default.
	ModeParallel Mode = "parallel"
	// ModeSequential runs one task at a time, in order.
	ModeSequential Mode = "sequential"
)

// DefaultMaxConcurrent is the number of tasks ModeParallel runs at once
// when ParallelOptions.MaxConcurrent is zero.
const DefaultMaxConcurrent = 4

// DefaultBranchPrefix starts the branch of a task that names none.
const DefaultBranchPrefix = "execbox/"

// Task environment variables, set for every Exec task.
const (
	// EnvTask holds the task's name.
	EnvTask = "EXECBOX_TASK"
	// EnvTaskIndex holds the task's position in ParallelOptions.Tasks,
	// from 0.
	EnvTaskIndex = "EXECBOX_TASK_INDEX"
)

// Task is one unit of work of Parallel, run in a worktree of its own on a
// branch of its own. Set exactly one of Exec and Func.
type Task struct {
	// Name identifies the task: letters, digits, '.', '_' and '-',
	// starting with a letter or digit; unique among the tasks. It names
	// the worktree's directory and, by default, its branch. Required.
	Name string
	// Branch is the task's new branch. Empty means BranchPrefix + Name.
	// An existing branch fails the task with ErrExists.
	Branch string
	// Base is where the branch starts. Empty means ParallelOptions.Base.
	Base string
	// Exec is a command run in the worktree; its Dir is relative to the
	// worktree. EXECBOX_TASK and EXECBOX_TASK_INDEX are added to its Env.
	Exec *execbox.ExecRequest
	// Func is Go code run with the worktree. An error or a panic fails
	// the task, not the others. It must return when ctx is done.
	Func func(ctx context.Context, wt *Repo) error
}

// ParallelOptions for Repo.Parallel.
type ParallelOptions struct {
	// Tasks to run. Required.
	Tasks []Task
	// Mode is ModeParallel or ModeSequential. Empty means ModeParallel.
	// Config key execution.mode.
	Mode Mode
	// MaxConcurrent bounds the tasks running at once in ModeParallel.
	// Zero means DefaultMaxConcurrent. Config key execution.max_concurrent.
	MaxConcurrent int
	// Base is the revision every task starts from, resolved once before
	// the first task starts. Empty means HEAD.
	Base string
	// BranchPrefix starts each task's default branch name. Empty means
	// DefaultBranchPrefix.
	BranchPrefix string
	// Dir is the directory, relative to the workspace, holding the
	// worktrees (one subdirectory per task). Empty means a sibling of the
	// repository ("repo.worktrees"), or ".execbox-worktrees" inside a
	// repository at the top of the workspace; a directory inside the
	// repository is added to .git/info/exclude so it never shows as
	// untracked.
	Dir string
	// Commit, if set, stages everything a successful task changed and
	// commits it on the task's branch with this message and identity
	// (All is implied), so the work outlives the worktree.
	Commit *CommitOptions
	// Keep leaves the worktrees in place. By default each is removed
	// (with force) when its task ends; branches are always kept.
	Keep bool
}

// TaskResult is what one task did.
type TaskResult struct {
	// Name and Branch of the task.
	Name   string
	Branch string
	// Path is the task's worktree, relative to the workspace; it is gone
	// after Parallel returns unless Keep was set.
	Path string
	// Base is the commit the branch started at.
	Base string
	// Result is what an Exec task's command did (a failing exit code is
	// data here, not Err).
	Result *execbox.Result
	// Status is the worktree's state when the task ended, before Commit.
	Status *Status
	// Commit is the hash of the commit ParallelOptions.Commit made, or
	// "" when there was nothing to commit or the task failed.
	Commit string
	// Head is the branch's commit at the end.
	Head string
	// Duration of the task, set-up and clean-up included.
	Duration time.Duration
	// Err says what went wrong: the worktree could not be made, the
	// command could not run, Func failed, Commit failed, or clean-up
	// failed. Nil for an Exec task whose command ran, whatever its exit.
	Err error
}

// OK reports a task that ran without error and, for an Exec task, whose
// command exited 0.
func (t *TaskResult) OK() bool {
	return t.Err == nil && (t.Result == nil || t.Result.Success())
}

var taskName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// Parallel runs tasks, each in a new worktree of the repository on a new
// branch, and returns one TaskResult per task, in the order of
// opts.Tasks. A task that fails (its worktree, its command, its Func, even
// a panic) is reported in its TaskResult and does not stop or touch the
// others. Worktrees are removed as their task ends unless opts.Keep;
// branches stay, with the work committed on them when opts.Commit is set.
//
// The error is for the run as a whole: invalid options (every problem,
// as *execbox.FieldError), a base that does not resolve, or ctx ending,
// in which case tasks not started report ctx's error and running ones are
// killed, their worktrees still removed.
func (r *Repo) Parallel(ctx context.Context, opts ParallelOptions) ([]TaskResult, error) {
	if err := r.validateParallel(&opts); err != nil {
		return nil, err
	}
	base := opts.Base
	if base == "" {
		base = "HEAD"
	}
	baseHash, err := r.Resolve(ctx, ResolveOptions{Rev: base})
	if err != nil {
		return nil, fmt.Errorf("base: %w", err)
	}
	dir, err := r.worktreeDir(ctx, opts.Dir)
	if err != nil {
		return nil, err
	}
	_, statErr := r.c.sb.Files().Stat(ctx, dir)
	madeDir := errors.Is(statErr, execbox.ErrNotFound)
	limit := opts.MaxConcurrent
	if opts.Mode == ModeSequential {
		limit = 1
	}
	// Worktrees of one run never run auto-gc under each other.
	shared := &Repo{c: r.c, dir: r.dir, cfg: append(append([]string(nil), r.cfg...), "gc.auto=0", "maintenance.auto=false")}
	run := &runner{repo: shared, opts: &opts, dir: dir, base: baseHash}

	results := make([]TaskResult, len(opts.Tasks))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range opts.Tasks {
		t := &opts.Tasks[i]
		results[i] = TaskResult{Name: t.Name, Branch: t.Branch, Path: path.Join(dir, t.Name)}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			results[i].Err = ctx.Err()
			continue
		}
		if ctx.Err() != nil {
			<-sem
			results[i].Err = ctx.Err()
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			run.task(ctx, i, t, &results[i])
		})
	}
	wg.Wait()
	if !opts.Keep {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		if err := shared.PruneWorktrees(cctx); err != nil {
			r.c.log.Warn("prune worktrees", "dir", r.dir, "err", err)
		}
		if madeDir {
			// Only if empty: a kept or failed removal leaves it.
			_ = r.c.sb.Files().Remove(cctx, dir, execbox.RemoveOptions{})
		}
	}
	return results, ctx.Err()
}

func (r *Repo) validateParallel(opts *ParallelOptions) error {
	var errs []error
	if len(opts.Tasks) == 0 {
		errs = append(errs, execbox.Invalid("tasks", "is required"))
	}
	switch opts.Mode {
	case "":
		opts.Mode = ModeParallel
	case ModeParallel, ModeSequential:
	default:
		errs = append(errs, execbox.Invalid("mode", "unknown mode %q (want parallel or sequential)", opts.Mode))
	}
	switch {
	case opts.MaxConcurrent < 0:
		errs = append(errs, execbox.Invalid("max_concurrent", "must not be negative"))
	case opts.MaxConcurrent == 0:
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.Base != "" {
		errs = append(errs, checkRef("base", opts.Base))
	}
	if opts.BranchPrefix == "" {
		opts.BranchPrefix = DefaultBranchPrefix
	} else if err := checkRef("branch_prefix", opts.BranchPrefix); err != nil {
		errs = append(errs, err)
	}
	if opts.Dir != "" {
		if _, err := r.c.workspacePath("dir", opts.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if c := opts.Commit; c != nil {
		if strings.TrimSpace(c.Message) == "" {
			errs = append(errs, execbox.Invalid("commit.message", "is required"))
		}
		if c.Author == nil && r.c.opts.Identity == nil {
			errs = append(errs, execbox.Invalid("commit.author", "is required (or Options.Identity)"))
		}
	}
	seen := map[string]bool{}
	tasks := make([]Task, len(opts.Tasks))
	for i, t := range opts.Tasks {
		f := fmt.Sprintf("tasks[%d]", i)
		switch {
		case !taskName.MatchString(t.Name) || strings.HasSuffix(t.Name, ".lock") || strings.Contains(t.Name, ".."):
			errs = append(errs, execbox.Invalid(f+".name", "%q must be 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit", t.Name))
		case seen[t.Name]:
			errs = append(errs, execbox.Invalid(f+".name", "%q is used by another task", t.Name))
		}
		seen[t.Name] = true
		if t.Branch == "" {
			t.Branch = opts.BranchPrefix + t.Name
		} else {
			errs = append(errs, checkRef(f+".branch", t.Branch))
		}
		if t.Base != "" {
			errs = append(errs, checkRef(f+".base", t.Base))
		}
		switch {
		case (t.Exec == nil) == (t.Func == nil):
			errs = append(errs, execbox.Invalid(f+".exec", "set exactly one of exec and func"))
		case t.Exec != nil:
			errs = append(errs, execbox.PrefixFields(f+".exec.", t.Exec.Validate()))
			if d := path.Clean(t.Exec.Dir); path.IsAbs(d) || d == ".." || strings.HasPrefix(d, "../") {
				errs = append(errs, &execbox.FieldError{Field: f + ".exec.dir", Problem: "must be relative to the worktree, inside it", Kind: execbox.ErrPermission})
			}
		}
		tasks[i] = t
	}
	opts.Tasks = tasks
	return errors.Join(errs...)
}

// runner runs the tasks of one Parallel call.
type runner struct {
	repo *Repo
	opts *ParallelOptions
	dir  string // holds the worktrees, relative to the workspace
	base string // resolved ParallelOptions.Base

	// mu serialises worktree add and remove: they update shared files
	// under .git/worktrees.
	mu sync.Mutex
}

// task runs one task into res. It never panics.
func (run *runner) task(ctx context.Context, i int, t *Task, res *TaskResult) {
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	var errs []error
	defer func() { res.Err = errors.Join(errs...) }()

	base := run.base
	if t.Base != "" {
		h, err := run.repo.Resolve(ctx, ResolveOptions{Rev: t.Base})
		if err != nil {
			errs = append(errs, fmt.Errorf("base: %w", err))
			return
		}
		base = h
	}
	res.Base = base
	// The directory must be new, so that whatever is there after a
	// cancelled add is git's half-made worktree, safe to delete.
	files := run.repo.c.sb.Files()
	if _, err := files.Stat(ctx, res.Path); err == nil {
		errs = append(errs, &Error{Op: "worktree add", Dir: run.repo.dir, Kind: ErrExists, Message: res.Path + " already exists"})
		return
	}
	run.mu.Lock()
	wt, err := run.repo.AddWorktree(ctx, AddWorktreeOptions{Path: res.Path, Branch: t.Branch, Base: base})
	run.mu.Unlock()
	if err != nil {
		errs = append(errs, err)
		if ctx.Err() != nil && !run.opts.Keep {
			// Cancelled while git was adding it: it may exist anyway,
			// whole or in part.
			run.removeWorktree(ctx, res.Path)
			cctx, cancel := cleanupContext(ctx)
			defer cancel()
			if err := files.Remove(cctx, res.Path, execbox.RemoveOptions{Recursive: true}); err != nil && !errors.Is(err, execbox.ErrNotFound) {
				errs = append(errs, fmt.Errorf("clean-up: %w", err))
			}
		}
		return
	}
	if !run.opts.Keep {
		defer func() {
			if err := run.removeWorktree(ctx, res.Path); err != nil {
				errs = append(errs, fmt.Errorf("clean-up: %w", err))
			}
		}()
	}

	ok := true
	if t.Exec != nil {
		req := *t.Exec
		req.Dir = path.Join(wt.dir, req.Dir)
		env := make(map[string]string, len(req.Env)+2)
		for k, v := range req.Env {
			env[k] = v
		}
		env[EnvTask] = t.Name
		env[EnvTaskIndex] = strconv.Itoa(i)
		req.Env = env
		r, err := run.repo.c.sb.Exec(ctx, req)
		run.repo.c.redac.result(&r)
		if err != nil {
			errs = append(errs, err)
			ok = false
			if ctx.Err() == nil {
				return
			}
		}
		res.Result = &r
		ok = ok && r.Success()
	} else if err := callFunc(ctx, t.Func, wt); err != nil {
		errs = append(errs, err)
		ok = false
	}

	// What the task left, and its commit, even after a failure: the
	// worktree is still there to be inspected until clean-up.
	sctx, cancel := cleanupContext(ctx)
	defer cancel()
	if st, err := wt.Status(sctx, StatusOptions{Untracked: UntrackedAll}); err != nil {
		errs = append(errs, fmt.Errorf("status: %w", err))
	} else {
		res.Status = &st
		if c := run.opts.Commit; c != nil && ok && ctx.Err() == nil && !st.Clean() {
			co := *c
			co.All = true
			h, err := wt.Commit(sctx, co)
			switch {
			case errors.Is(err, ErrNothingToCommit):
			case err != nil:
				errs = append(errs, err)
			default:
				res.Commit = h
			}
		}
	}
	if h, err := wt.Head(sctx); err == nil {
		res.Head = h
	}
}

// removeWorktree removes a task's worktree, even after ctx is done.
func (run *runner) removeWorktree(ctx context.Context, p string) error {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.repo.RemoveWorktree(cctx, RemoveWorktreeOptions{Path: p, Force: true})
}

// callFunc runs f, turning a panic into an error.
func callFunc(ctx context.Context, f func(context.Context, *Repo) error, wt *Repo) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("task panicked: %v", v)
		}
	}()
	return f(ctx, wt)
}

// cleanupContext returns a context for clean-up that outlives ctx's
// cancellation, bounded on its own.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
}

// worktreeDir returns the directory holding a run's worktrees, relative
// to the workspace, and makes sure git ignores it when it lies inside
// the repository's working tree.
func (r *Repo) worktreeDir(ctx context.Context, dir string) (string, error) {
	top, realWS, err := r.top(ctx)
	if err != nil {
		return "", err
	}
	if dir == "" {
		if top == "." {
			dir = ".execbox-worktrees"
		} else {
			dir = top + ".worktrees"
		}
	}
	dir, err = r.c.workspacePath("dir", dir)
	if err != nil {
		return "", err
	}
	inside := top == "." || dir == top || strings.HasPrefix(dir, top+"/")
	if !inside {
		return dir, nil
	}
	if dir == top {
		return "", execbox.Invalid("dir", "must not be the repository's top level")
	}
	pattern := dir
	if top != "." {
		pattern = strings.TrimPrefix(dir, top+"/")
	}
	return dir, r.exclude(ctx, pattern, realWS)
}

// exclude adds "/pattern/" to the repository's info/exclude unless it,
// or a directory holding it, is there.
func (r *Repo) exclude(ctx context.Context, pattern, realWS string) error {
	res, err := r.git(ctx, call{op: "parallel", args: []string{"rev-parse", "--git-path", "info/exclude"}})
	if err != nil {
		return err
	}
	p := strings.TrimSpace(string(res.Stdout.Data))
	if path.IsAbs(p) {
		p = r.c.rel(p, realWS)
	} else {
		p = path.Join(r.dir, p)
	}
	if path.IsAbs(p) {
		return &execbox.FieldError{Field: "dir", Problem: "the repository's git directory is outside the workspace: set dir outside the working tree", Kind: execbox.ErrPermission}
	}
	line := "/" + pattern + "/"
	files := r.c.sb.Files()
	data, err := files.ReadFile(ctx, p, execbox.ReadOptions{})
	if err != nil && !errors.Is(err, execbox.ErrNotFound) {
		return fmt.Errorf("read %s: %w", p, err)
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "/") && strings.HasSuffix(l, "/") && strings.HasPrefix(line, l) {
			return nil
		}
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	data = append(data, line+"\n"...)
	if err := files.WriteFile(ctx, p, data, execbox.WriteOptions{Parents: true}); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}
