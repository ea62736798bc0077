package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/git"
	"github.com/execbox/execbox/internal/config"
)

// Exit code of `execbox git` and `execbox parallel` when git did not do
// what was asked (a conflict, a rejected push, a task that failed).
const exitGitFailed = 1

// defaultTokenEnv is the variable holding a git token, unless --token-env
// names another. A token is never taken from a flag: argv is visible to
// every user of the machine.
const defaultTokenEnv = "EXECBOX_GIT_TOKEN"

// defaultAuthorEnv holds the identity of commits, "Name <email>", unless
// --author is given.
const defaultAuthorEnv = "EXECBOX_GIT_AUTHOR"

var gitCommand = &command{
	name:    "git",
	summary: "clone, commit, push, pull, status, worktrees... in the workspace",
	args:    "OPERATION [flags] [arguments]",
	help: `Git runs a git operation on a repository in the workspace, through the
configured runtime, with no git config of the host (only the repository's)
and no prompt. The repository is --repo (default the workspace itself); the
workspace is the current directory unless --workspace or the config names
another.

Operations:
  clone URL [PATH]               clone (--branch, --depth)
  status                         branch, ahead/behind, changes (--json)
  add [PATH...]                  stage (--all)
  commit -m MESSAGE              commit staged changes (--all, --author)
  checkout BRANCH [START]        switch branch (-b creates it; --detach, --force)
  push [REMOTE [REFSPEC...]]     push the current branch (--set-upstream, --force)
  pull [REMOTE [BRANCH]]         fetch and merge (--rebase, --ff-only)
  fetch [REMOTE [REFSPEC...]]    fetch (--prune, --depth)
  diff [FROM [TO]] [-- PATH...]  show changes (--staged, --stat, --json)
  log [REV] [-- PATH...]         list commits (-n, --json)
  head                           print the current commit
  worktree add PATH [BASE]       new worktree on a new branch (-b BRANCH, --detach)
  worktree list                  list worktrees (--json)
  worktree remove PATH           remove a worktree (--force, --delete-branch)
  worktree prune                 forget worktrees whose directory is gone

'execbox git OPERATION -h' shows an operation's flags.

Commits need an identity: --author 'Name <email>', else $EXECBOX_GIT_AUTHOR.
A token for HTTPS remotes is read from $EXECBOX_GIT_TOKEN (or the variable
--token-env names), never from a flag, and sent only to remotes under
--token-url (for clone, default the clone URL's scheme and host); it is not
written to disk and is redacted from all output.

Exit codes: 0 on success, 1 when git failed (conflict, rejected push,
authentication...), 2 for a usage error, 125 when execbox could not run git.`,
	run: runGit,
}

// gitOpts are the flags every git operation shares.
type gitOpts struct {
	cf       config.Flags
	repo     string
	tokenEnv string
	tokenURL string
	author   string
	json     bool
}

func (o *gitOpts) register(fs *flag.FlagSet) {
	o.cf.Register(fs, "runtime", "workspace", "exec.timeout", "log.level", "log.format")
	fs.StringVar(&o.repo, "repo", ".", "repository `DIR`, relative to the workspace")
	fs.StringVar(&o.tokenEnv, "token-env", defaultTokenEnv, "environment `VARIABLE` holding a token for HTTPS remotes")
	fs.StringVar(&o.tokenURL, "token-url", "", "`URL` prefix the token is sent to, e.g. https://github.com/acme/")
}

// gitOp is one operation of `execbox git`.
type gitOp struct {
	name  string
	args  string
	help  string
	paths bool // takes pathspecs after "--"
	flags func(fs *flag.FlagSet, o *gitOpts) func(ctx context.Context, g *gitRun, args []string) error
}

// gitRun is an operation in progress: its sandbox, client and output.
type gitRun struct {
	s      *stdio
	o      *gitOpts
	client *git.Client
	repo   *git.Repo
	paths  []string // after "--", for operations that take paths
}

func runGit(ctx context.Context, c *command, s *stdio, args []string) int {
	if code, done := gitUsage(c, s, args); done {
		return code
	}
	op, rest, err := findGitOp(c, args)
	if err != nil {
		return s.fail(ExitUsage, err)
	}
	call, code, done := parseGitOp(s, op, rest)
	if done {
		return code
	}
	cfg, code, ok := s.loadConfig(&call.o.cf)
	if !ok {
		return code
	}
	var cloneOrigin string
	if op.name == "clone" && len(call.positional) > 0 {
		cloneOrigin = originOf(call.positional[0])
	}
	creds, err := tokenCredentials(call.o, cloneOrigin, "git "+op.name)
	if err != nil {
		return s.fail(ExitUsage, err)
	}
	identity, err := commitIdentity(call.o.author)
	if err != nil {
		return s.fail(ExitUsage, err)
	}
	return call.run(ctx, s, cfg, creds, identity)
}

// gitUsage answers `execbox git` alone (the usage on stderr: a usage
// error) and `execbox git -h` (the usage on stdout); done is false for
// anything else.
func gitUsage(c *command, s *stdio, args []string) (code int, done bool) {
	if len(args) > 0 && args[0] != "-h" && args[0] != "-help" && args[0] != "--help" {
		return 0, false
	}
	fs := newFlagSet(c)
	if len(args) == 0 {
		printCommandUsage(s.err, c, fs)
		return ExitUsage, true
	}
	printCommandUsage(s.out, c, fs)
	return 0, true
}

// findGitOp finds the operation named in args, which shared flags may
// precede (execbox git --repo r status) and which for worktree is two
// words, and returns it with the rest of args: those flags, then what
// followed the name.
func findGitOp(c *command, args []string) (*gitOp, []string, error) {
	pre := newFlagSet(c)
	(&gitOpts{}).register(pre)
	if err := pre.Parse(args); err != nil || pre.NArg() == 0 {
		return nil, nil, errors.New("git: missing or bad operation (see 'execbox git -h')")
	}
	before := args[:len(args)-pre.NArg()]
	name := pre.Arg(0)
	rest := append(append([]string{}, before...), pre.Args()[1:]...)
	if name == "worktree" {
		after := pre.Args()[1:]
		if len(after) == 0 {
			return nil, nil, errors.New("git worktree: missing add, list, remove or prune (see 'execbox git -h')")
		}
		name = "worktree " + after[0]
		rest = append(append([]string{}, before...), after[1:]...)
	}
	var op *gitOp
	for _, o := range gitOps {
		if o.name == name {
			op = o
		}
	}
	if op == nil {
		return nil, nil, fmt.Errorf("git: unknown operation %q (see 'execbox git -h')", name)
	}
	return op, rest, nil
}

// gitCall is one operation as its command line asked for it.
type gitCall struct {
	op         *gitOp
	o          *gitOpts
	do         func(ctx context.Context, g *gitRun, args []string) error
	positional []string // the arguments after the flags, before "--"
	paths      []string // the arguments after "--"
}

// parseGitOp parses the flags of op (shared and its own) and checks that
// none follows an argument. If done, the caller returns code: 0 after
// the operation's help, ExitUsage after a bad flag.
func parseGitOp(s *stdio, op *gitOp, rest []string) (call *gitCall, code int, done bool) {
	oc := &command{name: "git " + op.name, args: op.args, help: op.help}
	fs := newFlagSet(oc)
	o := &gitOpts{}
	o.register(fs)
	do := op.flags(fs, o)
	// Pathspecs follow "--", which flag parsing would swallow.
	rest, paths := splitDashDash(rest)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandUsage(s.out, oc, fs)
			return nil, 0, true
		}
		return nil, s.fail(ExitUsage, fmt.Errorf("git %s: %v (see 'execbox git %s -h')", op.name, err, op.name)), true
	}
	for _, a := range fs.Args() {
		if strings.HasPrefix(a, "-") {
			return nil, s.fail(ExitUsage, fmt.Errorf("git %s: %q after an argument: flags go before arguments (paths after --)", op.name, a)), true
		}
	}
	return &gitCall{op: op, o: o, do: do, positional: fs.Args(), paths: paths}, 0, false
}

// run opens a sandbox on the workspace, runs the operation on the
// repository --repo in it, and turns the outcome into an exit code.
func (call *gitCall) run(ctx context.Context, s *stdio, cfg *config.Config, creds *git.Credentials, identity *git.Signature) int {
	sb, code, ok := openWorkspaceSandbox(ctx, s, cfg)
	if !ok {
		return code
	}
	defer func() {
		if err := sb.Close(); err != nil {
			s.warn("close sandbox: %v", err)
		}
	}()
	client, err := git.NewClient(sb, git.Options{
		Credentials: creds,
		Identity:    identity,
		Timeout:     cfg.Exec.Timeout,
		Logger:      cfg.Logger(s.err),
	})
	if err != nil {
		return s.fail(ExitUsage, err)
	}
	g := &gitRun{s: s, o: call.o, client: client}
	args := call.positional
	if call.op.paths {
		g.paths = call.paths
	} else {
		args = append(args, call.paths...)
	}
	if g.repo, err = client.Repo(call.o.repo); err != nil {
		return s.fail(ExitUsage, fmt.Errorf("--repo: %w", err))
	}
	err = call.do(ctx, g, args)
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil:
		return interrupted(ctx)
	}
	return s.fail(gitErrorCode(err), err)
}

// tokenCredentials returns the token in $VARIABLE of --token-env for the
// remotes under --token-url, else under fallback (a clone URL's scheme
// and host); nil without a token. who prefixes the error of a token with
// no remote to go to.
func tokenCredentials(o *gitOpts, fallback, who string) (*git.Credentials, error) {
	token := os.Getenv(o.tokenEnv)
	if token == "" {
		return nil, nil
	}
	u := o.tokenURL
	if u == "" {
		u = fallback
	}
	if u == "" {
		return nil, fmt.Errorf("%s: $%s is set: --token-url must say which remotes the token is for", who, o.tokenEnv)
	}
	return &git.Credentials{URL: u, Token: token}, nil
}

// commitIdentity is the identity of commits: author (--author), else
// $EXECBOX_GIT_AUTHOR; nil when neither is set.
func commitIdentity(author string) (*git.Signature, error) {
	if author == "" {
		author = os.Getenv(defaultAuthorEnv)
	}
	if author == "" {
		return nil, nil
	}
	sig, err := parseSignature(author)
	if err != nil {
		return nil, fmt.Errorf("--author: %w", err)
	}
	return sig, nil
}

// openWorkspaceSandbox creates a sandbox of the configured runtime whose
// workspace is the configured one, else the current directory (never a
// temporary one: git works on the user's files).
func openWorkspaceSandbox(ctx context.Context, s *stdio, cfg *config.Config) (execbox.Sandbox, int, bool) {
	spec := cfg.Spec()
	if !cfg.IsSet("workspace") {
		wd, err := os.Getwd()
		if err != nil {
			return nil, s.fail(ExitFailure, fmt.Errorf("workspace: %w", err)), false
		}
		spec.Workspace = wd
	}
	rt, err := cfg.OpenRuntime(ctx, cfg.Logger(s.err), s.err)
	if err != nil {
		return nil, s.fail(errorCode(err), cfg.Annotate(err)), false
	}
	sb, err := rt.Create(ctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			return nil, interrupted(ctx), false
		}
		return nil, s.fail(errorCode(err), cfg.Annotate(err)), false
	}
	return sb, 0, true
}

// gitErrorCode maps an error of a git operation to an exit code.
func gitErrorCode(err error) int {
	var ge *git.Error
	switch {
	case errors.As(err, &ge):
		return exitGitFailed
	case errors.Is(err, execbox.ErrInvalidArgument), errors.Is(err, execbox.ErrPermission):
		return ExitUsage
	}
	return ExitFailure
}

// originOf returns "scheme://host/" of an http(s) URL, else "".
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host + "/"
}

// parseSignature parses "Name <email>".
func parseSignature(s string) (*git.Signature, error) {
	name, rest, ok := strings.Cut(s, "<")
	email, tail, ok2 := strings.Cut(rest, ">")
	name = strings.TrimSpace(name)
	if !ok || !ok2 || strings.TrimSpace(tail) != "" || name == "" || email == "" {
		return nil, fmt.Errorf("%q is not 'Name <email>'", s)
	}
	return &git.Signature{Name: name, Email: email}, nil
}

// splitDashDash splits args at the first "--"; after is nil without one.
func splitDashDash(args []string) (before, after []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], append([]string{}, args[i+1:]...)
		}
	}
	return args, nil
}

func (g *gitRun) printJSON(v any) error { return printJSON(g.s.out, v) }

func maxArgs(op string, args []string, n int) error {
	if len(args) > n {
		return execbox.Invalid(op, "too many arguments: %q%s", args, flagHint(args))
	}
	return nil
}

// flagHint explains arguments that look like flags after positional ones.
func flagHint(args []string) string {
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			return " (flags go before arguments)"
		}
	}
	return ""
}

var gitOps = []*gitOp{
	{name: "clone", args: "[flags] URL [PATH]", help: "Clone clones URL into PATH (default: the URL's last component), relative to the workspace.",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			branch := fs.String("branch", "", "`BRANCH` or tag to check out")
			depth := fs.Int("depth", 0, "shallow clone of `N` commits")
			return func(ctx context.Context, g *gitRun, args []string) error {
				if len(args) == 0 {
					return execbox.Invalid("url", "is required")
				}
				if err := maxArgs("clone", args, 2); err != nil {
					return err
				}
				opts := git.CloneOptions{URL: args[0], Branch: *branch, Depth: *depth}
				if len(args) == 2 {
					opts.Path = args[1]
				}
				r, err := g.client.Clone(ctx, opts)
				if err == nil {
					fmt.Fprintln(g.s.out, r.Dir())
				}
				return err
			}
		}},
	{name: "status", args: "[flags] [-- PATH...]", paths: true, help: "Status shows the branch, its upstream, and staged, unstaged, untracked and conflicted files.",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			fs.BoolVar(&o.json, "json", false, "print the status as JSON")
			all := fs.Bool("untracked-all", false, "list every untracked file, not just directories")
			return func(ctx context.Context, g *gitRun, args []string) error {
				if err := maxArgs("status", args, 0); err != nil {
					return err
				}
				opts := git.StatusOptions{Paths: g.paths}
				if *all {
					opts.Untracked = git.UntrackedAll
				}
				st, err := g.repo.Status(ctx, opts)
				if err != nil {
					return err
				}
				if o.json {
					return g.printJSON(api.NewGitStatus(&st))
				}
				printStatus(g.s.out, &st)
				return nil
			}
		}},
	{name: "add", args: "[flags] [PATH...]", paths: true, help: "Add stages the changes of PATHs (or every change with --all).",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			all := fs.Bool("all", false, "stage every change, untracked files included")
			return func(ctx context.Context, g *gitRun, args []string) error {
				return g.repo.Add(ctx, git.AddOptions{Paths: append(args, g.paths...), All: *all})
			}
		}},
	{name: "commit", args: "[flags]", help: "Commit records the staged changes with --message, as --author (or $EXECBOX_GIT_AUTHOR), and prints the commit's hash.",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			msg := fs.String("message", "", "commit `MESSAGE` (required)")
			fs.StringVar(msg, "m", "", "short for --message")
			all := fs.Bool("all", false, "stage every change first, untracked files included")
			fs.StringVar(&o.author, "author", "", "identity `'Name <email>'` (default $"+defaultAuthorEnv+")")
			allowEmpty := fs.Bool("allow-empty", false, "commit even with no change")
			amend := fs.Bool("amend", false, "replace the last commit")
			return func(ctx context.Context, g *gitRun, args []string) error {
				if err := maxArgs("commit", args, 0); err != nil {
					return err
				}
				h, err := g.repo.Commit(ctx, git.CommitOptions{Message: *msg, All: *all, AllowEmpty: *allowEmpty, Amend: *amend})
				if err == nil {
					fmt.Fprintln(g.s.out, h)
				}
				return err
			}
		}},
	{name: "checkout", args: "[flags] BRANCH [START]", help: "Checkout switches to BRANCH; with -b it creates BRANCH at START (default HEAD). A tag or commit is checked out detached.",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			create := fs.Bool("b", false, "create the branch")
			detach := fs.Bool("detach", false, "detach HEAD at the commit")
			force := fs.Bool("force", false, "discard local changes in the way")
			return func(ctx context.Context, g *gitRun, args []string) error {
				if len(args) == 0 {
					return execbox.Invalid("branch", "is required")
				}
				if err := maxArgs("checkout", args, 2); err != nil {
					return err
				}
				opts := git.CheckoutOptions{Branch: args[0], Create: *create, Detach: *detach, Force: *force}
				if len(args) == 2 {
					opts.StartPoint = args[1]
				}
				return g.repo.Checkout(ctx, opts)
			}
		}},
	{name: "push", args: "[flags] [REMOTE [REFSPEC...]]", help: "Push sends the current branch (or REFSPECs) to REMOTE (default origin).",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			up := fs.Bool("set-upstream", false, "make the pushed branch the upstream")
			force := fs.Bool("force", false, "overwrite the remote branch")
			tags := fs.Bool("tags", false, "push every tag too")
			return func(ctx context.Context, g *gitRun, args []string) error {
				opts := git.PushOptions{SetUpstream: *up, Force: *force, Tags: *tags}
				if len(args) > 0 {
					opts.Remote, opts.Refspecs = args[0], args[1:]
				}
				return g.repo.Push(ctx, opts)
			}
		}},
	{name: "pull", args: "[flags] [REMOTE [BRANCH]]", help: "Pull fetches from REMOTE (default origin) and merges BRANCH (default the upstream).",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			rebase := fs.Bool("rebase", false, "rebase instead of merging")
			ffOnly := fs.Bool("ff-only", false, "only fast-forward")
			fs.StringVar(&o.author, "author", "", "identity of a merge commit `'Name <email>'` (default $"+defaultAuthorEnv+")")
			return func(ctx context.Context, g *gitRun, args []string) error {
				if err := maxArgs("pull", args, 2); err != nil {
					return err
				}
				opts := git.PullOptions{Rebase: *rebase, FFOnly: *ffOnly}
				if len(args) > 0 {
					opts.Remote = args[0]
				}
				if len(args) > 1 {
					opts.Branch = args[1]
				}
				return g.repo.Pull(ctx, opts)
			}
		}},
	{name: "fetch", args: "[flags] [REMOTE [REFSPEC...]]", help: "Fetch downloads commits and refs from REMOTE (default origin).",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			prune := fs.Bool("prune", false, "delete remote-tracking branches that are gone")
			depth := fs.Int("depth", 0, "deepen or shorten a shallow history to `N` commits")
			tags := fs.Bool("tags", false, "fetch every tag")
			return func(ctx context.Context, g *gitRun, args []string) error {
				opts := git.FetchOptions{Prune: *prune, Depth: *depth, Tags: *tags}
				if len(args) > 0 {
					opts.Remote, opts.Refspecs = args[0], args[1:]
				}
				return g.repo.Fetch(ctx, opts)
			}
		}},
	{name: "diff", args: "[flags] [FROM [TO]] [-- PATH...]", paths: true, help: "Diff prints the changes between the working tree, the index (--staged) or two commits.",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			staged := fs.Bool("staged", false, "compare the index with HEAD (what commit records)")
			stat := fs.Bool("stat", false, "list files with added and deleted line counts instead of the patch")
			fs.BoolVar(&o.json, "json", false, "print files and patch as JSON")
			return func(ctx context.Context, g *gitRun, args []string) error {
				revs := args
				if err := maxArgs("diff", revs, 2); err != nil {
					return err
				}
				opts := git.DiffOptions{Staged: *staged, Paths: g.paths}
				if len(revs) > 0 {
					opts.From = revs[0]
				}
				if len(revs) > 1 {
					opts.To = revs[1]
				}
				d, err := g.repo.Diff(ctx, opts)
				switch {
				case err != nil:
					return err
				case o.json:
					return g.printJSON(api.NewGitDiff(&d))
				case *stat:
					tw := tabwriter.NewWriter(g.s.out, 0, 0, 2, ' ', 0)
					for _, f := range d.Files {
						name := f.Path
						if f.OrigPath != "" {
							name = f.OrigPath + " => " + f.Path
						}
						if f.Binary {
							fmt.Fprintf(tw, "-\t-\t%s\n", name)
						} else {
							fmt.Fprintf(tw, "+%d\t-%d\t%s\n", f.Added, f.Deleted, name)
						}
					}
					return tw.Flush()
				}
				_, err = io.WriteString(g.s.out, d.Patch)
				if d.Truncated {
					g.s.warn("diff truncated in the middle: narrow it with paths")
				}
				return err
			}
		}},
	{name: "log", args: "[flags] [REV] [-- PATH...]", paths: true, help: "Log lists commits reachable from REV (default HEAD), newest first.",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			n := fs.Int("n", git.DefaultLogCount, "show at most `N` commits (negative: all)")
			fs.BoolVar(&o.json, "json", false, "print the commits as JSON")
			return func(ctx context.Context, g *gitRun, args []string) error {
				revs := args
				if err := maxArgs("log", revs, 1); err != nil {
					return err
				}
				opts := git.LogOptions{MaxCount: *n, Paths: g.paths}
				if opts.MaxCount == 0 {
					opts.MaxCount = -1
				}
				if len(revs) == 1 {
					opts.Rev = revs[0]
				}
				commits, err := g.repo.Log(ctx, opts)
				if err != nil {
					return err
				}
				if o.json {
					return g.printJSON(newCommitReports(commits))
				}
				for _, c := range commits {
					fmt.Fprintf(g.s.out, "%s %s %s <%s> %s\n", c.Hash[:min(12, len(c.Hash))], c.AuthorTime.Format("2006-01-02"), c.Author.Name, c.Author.Email, c.Subject)
				}
				return nil
			}
		}},
	{name: "head", args: "[flags]", help: "Head prints the hash of the commit checked out.",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			return func(ctx context.Context, g *gitRun, args []string) error {
				if err := maxArgs("head", args, 0); err != nil {
					return err
				}
				h, err := g.repo.Head(ctx)
				if err == nil {
					fmt.Fprintln(g.s.out, h)
				}
				return err
			}
		}},
	{name: "worktree add", args: "[flags] PATH [BASE]", help: "Worktree add makes a working tree at PATH (relative to the workspace) on a new branch (-b, default the last component of PATH) from BASE (default HEAD).",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			branch := fs.String("b", "", "new `BRANCH` (default the last component of PATH)")
			detach := fs.Bool("detach", false, "no branch: detach HEAD at BASE")
			return func(ctx context.Context, g *gitRun, args []string) error {
				if len(args) == 0 {
					return execbox.Invalid("path", "is required")
				}
				if err := maxArgs("worktree add", args, 2); err != nil {
					return err
				}
				opts := git.AddWorktreeOptions{Path: args[0], Branch: *branch, Detach: *detach}
				if opts.Branch == "" && !opts.Detach {
					parts := strings.Split(strings.TrimRight(args[0], "/"), "/")
					opts.Branch = parts[len(parts)-1]
				}
				if len(args) == 2 {
					opts.Base = args[1]
				}
				wt, err := g.repo.AddWorktree(ctx, opts)
				if err == nil {
					fmt.Fprintln(g.s.out, wt.Dir())
				}
				return err
			}
		}},
	{name: "worktree list", args: "[flags]", help: "Worktree list lists the repository's working trees, the main one first.",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			fs.BoolVar(&o.json, "json", false, "print the worktrees as JSON")
			return func(ctx context.Context, g *gitRun, args []string) error {
				wts, err := g.repo.Worktrees(ctx)
				if err != nil {
					return err
				}
				if o.json {
					return g.printJSON(newWorktreeReports(wts))
				}
				tw := tabwriter.NewWriter(g.s.out, 0, 0, 2, ' ', 0)
				for _, w := range wts {
					what := w.Branch
					switch {
					case w.Bare:
						what = "(bare)"
					case w.Detached:
						what = "(detached)"
					}
					var notes []string
					if w.Locked {
						notes = append(notes, "locked")
					}
					if w.Prunable {
						notes = append(notes, "prunable")
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", w.Path, w.Head[:min(12, len(w.Head))], what, strings.Join(notes, ","))
				}
				return tw.Flush()
			}
		}},
	{name: "worktree remove", args: "[flags] PATH", help: "Worktree remove removes the working tree at PATH.",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			force := fs.Bool("force", false, "remove it even with changes, or locked")
			del := fs.Bool("delete-branch", false, "delete its branch too")
			return func(ctx context.Context, g *gitRun, args []string) error {
				if len(args) != 1 {
					return execbox.Invalid("path", "exactly one is required, got %q%s", args, flagHint(args))
				}
				return g.repo.RemoveWorktree(ctx, git.RemoveWorktreeOptions{Path: args[0], Force: *force, DeleteBranch: *del})
			}
		}},
	{name: "worktree prune", args: "[flags]", help: "Worktree prune forgets working trees whose directory is gone.",
		flags: func(fs *flag.FlagSet, o *gitOpts) func(context.Context, *gitRun, []string) error {
			return func(ctx context.Context, g *gitRun, args []string) error {
				return g.repo.PruneWorktrees(ctx)
			}
		}},
}

// printStatus prints a status for people.
func printStatus(w io.Writer, st *git.Status) {
	head := st.Branch
	switch {
	case st.Detached:
		head = "HEAD (detached at " + st.Commit[:min(12, len(st.Commit))] + ")"
	case st.Commit == "":
		head += " (no commits yet)"
	}
	if st.Upstream != "" {
		head += "..." + st.Upstream
		switch {
		case st.UpstreamGone:
			head += " [gone]"
		case st.Ahead > 0 || st.Behind > 0:
			head += " [ahead " + strconv.Itoa(st.Ahead) + ", behind " + strconv.Itoa(st.Behind) + "]"
		}
	}
	fmt.Fprintf(w, "## %s\n", head)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	name := func(f git.FileStatus) string {
		if f.OrigPath != "" {
			return f.OrigPath + " -> " + f.Path
		}
		return f.Path
	}
	for _, c := range st.Conflicts {
		fmt.Fprintf(tw, "conflict\t%s\t%s\n", c.Kind, c.Path)
	}
	for _, f := range st.Staged {
		fmt.Fprintf(tw, "staged\t%s\t%s\n", f.Change, name(f))
	}
	for _, f := range st.Unstaged {
		fmt.Fprintf(tw, "unstaged\t%s\t%s\n", f.Change, name(f))
	}
	for _, p := range st.Untracked {
		fmt.Fprintf(tw, "untracked\t\t%s\n", p)
	}
	tw.Flush()
}
