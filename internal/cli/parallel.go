package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/git"
	"github.com/execbox/execbox/internal/config"
)

var parallelCommand = &command{
	name:    "parallel",
	summary: "run a command in several git worktrees at once",
	args:    "[flags] -- COMMAND [ARG...]",
	help: `Parallel runs COMMAND (no shell: use sh -c 'LINE' for one) once per task, each
in a new git worktree of the repository --repo on a new branch
(execbox/NAME) from --base (default HEAD), and reports what each did. Tasks
are named by --tasks (a,b,c) or numbered by -n; each command sees its name
in $EXECBOX_TASK and its index in $EXECBOX_TASK_INDEX.

--mode parallel (the default) runs up to --max-concurrent tasks at once;
--mode sequential runs them one after the other. A failing task does not
stop the others. With --commit MESSAGE, what a successful task changed is
committed on its branch (as --author, or $EXECBOX_GIT_AUTHOR). Worktrees
are removed at the end unless --keep; branches stay.

The repository is used as it is in the workspace, or cloned from --clone
URL first (unless already cloned there; --fresh insists on a new clone).

Output: per task, a header line, then its standard output and error; or,
with --json, an array of task results: {"name", "branch", "path", "base",
"ok", "result" (the command's result, as exec --json prints it), "status"
(as git status --json prints it), "commit", "head", "duration_ms",
"error"}. Exit codes: 0 when every task
succeeded, 1 when one did not, 2 for a usage error, 125 when execbox could
not run the tasks.`,
	run: runParallel,
}

func runParallel(ctx context.Context, c *command, s *stdio, args []string) int {
	fs := newFlagSet(c)
	f := &parallelFlags{}
	f.register(fs)
	if code, done := s.parse(c, fs, args); done {
		return code
	}
	argv := fs.Args()
	taskNames, err := f.check(argv)
	if err != nil {
		return s.fail(ExitUsage, err)
	}
	cfg, code, ok := s.loadConfig(&f.o.cf)
	if !ok {
		return code
	}
	identity, err := commitIdentity(f.o.author)
	if err != nil {
		return s.fail(ExitUsage, err)
	}
	creds, err := tokenCredentials(&f.o, originOf(f.cloneURL), "parallel")
	if err != nil {
		return s.fail(ExitUsage, err)
	}
	opts := f.parallelOptions(cfg, argv, taskNames)
	sb, code, ok := openWorkspaceSandbox(ctx, s, cfg)
	if !ok {
		return code
	}
	defer func() {
		if err := sb.Close(); err != nil {
			s.warn("close sandbox: %v", err)
		}
	}()
	client, err := git.NewClient(sb, git.Options{Credentials: creds, Identity: identity, Logger: cfg.Logger(s.err)})
	if err != nil {
		return s.fail(ExitUsage, err)
	}
	return f.runTasks(ctx, s, client, opts)
}

// parallelFlags are the flags of `execbox parallel`: the shared git flags
// and its own.
type parallelFlags struct {
	o         gitOpts
	names     string
	n         int
	mode      string
	maxConc   int
	base      string
	dir       string
	keep      bool
	commitMsg string
	cloneURL  string
	fresh     bool
	jsonOut   bool
}

func (f *parallelFlags) register(fs *flag.FlagSet) {
	f.o.register(fs)
	fs.StringVar(&f.names, "tasks", "", "comma-separated task `NAMES`")
	fs.IntVar(&f.n, "n", 0, "number of tasks, named task-1 to task-`N`")
	fs.StringVar(&f.mode, "mode", string(git.ModeParallel), "`MODE`: parallel or sequential")
	fs.IntVar(&f.maxConc, "max-concurrent", git.DefaultMaxConcurrent, "tasks running at once in parallel mode")
	fs.StringVar(&f.base, "base", "", "`REV` every task starts from (default HEAD)")
	fs.StringVar(&f.dir, "dir", "", "`DIR` holding the worktrees (default next to the repository)")
	fs.BoolVar(&f.keep, "keep", false, "keep the worktrees afterwards")
	fs.StringVar(&f.commitMsg, "commit", "", "commit each successful task's changes on its branch with `MESSAGE`")
	fs.StringVar(&f.o.author, "author", "", "identity of the commits `'Name <email>'` (default $"+defaultAuthorEnv+")")
	fs.StringVar(&f.cloneURL, "clone", "", "clone `URL` into --repo first, unless already cloned there")
	fs.BoolVar(&f.fresh, "fresh", false, "with --clone: always clone (--repo must not exist)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the task results as JSON")
}

// check checks the command line (a command, which tasks, --fresh only
// with --clone), reporting every problem at once, and returns the names
// of the tasks.
func (f *parallelFlags) check(argv []string) ([]string, error) {
	var errs []error
	if len(argv) == 0 {
		errs = append(errs, errors.New("parallel: no command given (usage: execbox parallel [flags] -- COMMAND [ARG...])"))
	}
	var taskNames []string
	switch {
	case f.names != "" && f.n != 0:
		errs = append(errs, errors.New("parallel: --tasks and -n cannot be used together"))
	case f.names != "":
		for name := range strings.SplitSeq(f.names, ",") {
			taskNames = append(taskNames, strings.TrimSpace(name))
		}
	case f.n > 0:
		for i := range f.n {
			taskNames = append(taskNames, fmt.Sprintf("task-%d", i+1))
		}
	default:
		errs = append(errs, errors.New("parallel: say which tasks to run with --tasks or -n"))
	}
	if f.fresh && f.cloneURL == "" {
		errs = append(errs, errors.New("parallel: --fresh needs --clone"))
	}
	return taskNames, errors.Join(errs...)
}

// parallelOptions makes one task per name, each running argv as exec
// would with the configuration cfg.
func (f *parallelFlags) parallelOptions(cfg *config.Config, argv, taskNames []string) git.ParallelOptions {
	req := cfg.ExecRequest()
	req.Command = argv
	tasks := make([]git.Task, len(taskNames))
	for i, name := range taskNames {
		r := req
		tasks[i] = git.Task{Name: name, Exec: &r}
	}
	opts := git.ParallelOptions{
		Tasks:         tasks,
		Mode:          git.Mode(f.mode),
		MaxConcurrent: f.maxConc,
		Base:          f.base,
		Dir:           f.dir,
		Keep:          f.keep,
	}
	if f.commitMsg != "" {
		opts.Commit = &git.CommitOptions{Message: f.commitMsg}
	}
	return opts
}

// repoError names --repo in an error about the repository's path (the
// field dir of git.Client.Open, path of Clone), which would otherwise
// name a field the user never set.
func repoError(err error) error {
	var fe *execbox.FieldError
	if errors.As(err, &fe) && (fe.Field == "dir" || fe.Field == "path") {
		return &config.SourceError{Source: "--repo", Err: fe}
	}
	return err
}

// runTasks prepares the repository (cloning it if asked), runs the tasks
// and prints their results; the exit code says whether all succeeded.
// Interrupted, it still prints what the tasks did.
func (f *parallelFlags) runTasks(ctx context.Context, s *stdio, client *git.Client, opts git.ParallelOptions) int {
	repo, err := client.Prepare(ctx, git.PrepareOptions{Path: f.o.repo, URL: f.cloneURL, Fresh: f.fresh})
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx)
		}
		return s.fail(gitErrorCode(err), repoError(err))
	}
	results, err := repo.Parallel(ctx, opts)
	switch {
	case ctx.Err() != nil:
		printTasks(s, results, f.jsonOut)
		return interrupted(ctx)
	case err != nil:
		return s.fail(gitErrorCode(err), err)
	}
	if err := printTasks(s, results, f.jsonOut); err != nil {
		return s.fail(ExitFailure, err)
	}
	failed := 0
	for i := range results {
		if !results[i].OK() {
			failed++
		}
	}
	if failed > 0 {
		s.warn("%d of %d tasks failed", failed, len(results))
		return exitGitFailed
	}
	return 0
}

// printTasks prints the results: JSON, or per task a header on stdout
// followed by its output on stdout and stderr.
func printTasks(s *stdio, results []git.TaskResult, asJSON bool) error {
	if asJSON {
		reports := make([]taskReport, len(results))
		for i := range results {
			reports[i] = newTaskReport(&results[i])
		}
		return printJSON(s.out, reports)
	}
	for i := range results {
		r := &results[i]
		outcome := "not run"
		if r.Result != nil {
			outcome = r.Result.String()
		}
		line := fmt.Sprintf("=== %s (%s): %s in %s", r.Name, r.Branch, outcome, r.Duration.Round(time.Millisecond))
		if r.Commit != "" {
			line += ", committed " + r.Commit[:min(12, len(r.Commit))]
		}
		if r.Err != nil {
			line += ": " + strings.ReplaceAll(r.Err.Error(), "\n", "; ")
		}
		if _, err := fmt.Fprintln(s.out, line); err != nil {
			return err
		}
		if r.Result != nil {
			if _, err := s.out.Write(r.Result.Stdout.Data); err != nil {
				return err
			}
			s.err.Write(r.Result.Stderr.Data)
		}
	}
	return nil
}
