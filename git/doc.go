// Package git runs git in an execbox sandbox: clone, checkout, add,
// commit, push, pull, fetch, merge, status, diff, log, worktrees, and
// tasks run in parallel, each in a worktree of its own.
//
// It is built on execbox.Sandbox alone (Exec with an argv, never a shell
// line, and Files), so it works the same on every runtime; git itself
// must be installed where the sandbox's commands run.
//
//	c := git.New(sb, git.Options{
//		Identity:    &git.Signature{Name: "agent", Email: "agent@example.com"},
//		Credentials: &git.Credentials{URL: "https://github.com/acme/", Token: token},
//	})
//	repo, err := c.Clone(ctx, git.CloneOptions{URL: "https://github.com/acme/app.git", Path: "app"})
//	...
//	st, err := repo.Status(ctx, git.StatusOptions{})
//	hash, err := repo.Commit(ctx, git.CommitOptions{Message: "fix", All: true})
//	err = repo.Push(ctx, git.PushOptions{})
//
// # Shape
//
// A Client runs git in one sandbox; a Repo is a handle on a directory of
// its workspace (Client.Repo, Open, Init, Clone, Prepare, or
// Repo.AddWorktree). Each operation takes a context and its own options
// struct, whose zero fields mean the documented default. Both are safe for
// concurrent use; git's own locks serialise writes to one repository.
// Cancelling the context kills the git command's whole process tree, as
// for any Exec.
//
// # Isolation from the host
//
// The result of a git command must not depend on who runs execbox or
// where. Every command runs with GIT_CONFIG_NOSYSTEM=1,
// GIT_CONFIG_GLOBAL=/dev/null and HOME (and XDG_CONFIG_HOME) pointing to a
// directory that does not exist, so no system, user or workspace-level
// config, ignore or attributes file is read: only the repository's own
// .git/config. It runs under the execbox.EnvClean policy unless
// Options.EnvPolicy says otherwise, so GIT_DIR, GIT_TRACE and the like of
// the host do not reach it. It never prompts (GIT_TERMINAL_PROMPT=0, no
// askpass, no editor) and speaks English (LC_ALL=C), which errors are
// classified by. Identities come from the caller (Options.Identity,
// CommitOptions.Author) through GIT_AUTHOR_* and GIT_COMMITTER_*.
//
// # Credentials
//
// A token (Options.Credentials) authenticates HTTP(S) remotes. It is
// handed to git as the value of http.<URL>.extraHeader through git's
// environment-only configuration (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_0,
// GIT_CONFIG_VALUE_0), as "Authorization: Basic base64(user:token)" (or
// Bearer). So the token is:
//
//   - not in argv, which any user of the machine can read in a process
//     listing (/proc/PID/cmdline); /proc/PID/environ is readable only by
//     the same user and root;
//   - never written to disk: not in the remote URL stored in .git/config
//     (URLs carrying a password are refused), not in a credential store;
//   - only sent to remotes under Credentials.URL, matched by git itself
//     (scheme, host, port, path prefix), after insteadOf rewriting, so a
//     remote URL changed inside the sandbox cannot draw it elsewhere; curl
//     drops the header on a redirect to another host;
//   - only in the environment of commands that talk to such a remote
//     (clone, fetch, push, and the fetch half of Pull, whose merge half
//     runs without it);
//   - redacted, in every form it could be printed (raw, base64, URL
//     escaped), from all output this package returns: errors (which carry
//     git's messages), Results and logs, which never include the
//     environment anyway.
//
// The alternative, a credential helper reading the token from an
// environment variable, was rejected: it needs a helper program or a
// shell in the sandbox, git offers whatever a helper returns to every
// other configured helper ("credential approve", e.g. a store helper
// written into .git/config that saves it to a file), and it gives no
// per-URL scoping that a changed remote cannot defeat.
//
// A command carrying the token also runs with hooks disabled
// (core.hooksPath=/dev/null), no fsmonitor, askpass or credential helper,
// TLS verification on for that URL, tracing off, and only the
// credentials' scheme allowed as a transport (protocol.allow=never), so
// no program named by the repository's config (a hook, an ssh command, an
// upload-pack) starts with the token in its environment.
//
// What this does not protect against: code already running in the same
// sandbox as the same user while git runs can read git's environment
// from /proc. Give the sandbox a token scoped to what the task needs.
//
// # Repositories written by untrusted code
//
// The local runtime runs git on the host, as the user who runs execbox,
// on a workspace that code in a sandbox (or a clone of a stranger's
// repository) may have written. git obeys the repository's .git/config
// and runs what it names: core.fsmonitor at every status, a filter's
// clean command at add, a diff driver, core.sshCommand at fetch, a hook
// at commit. On such a sandbox (Capabilities().Isolation false, or a
// sandbox that does not say), every git command therefore
//
//   - runs with core.hooksPath=/dev/null, core.fsmonitor=false,
//     credential.helper= (no helper), core.askPass= and
//     protocol.ext.allow=never on its command line, which wins over the
//     repository's config, so no hook, fsmonitor, helper or ext::
//     transport program starts even if the config changes while git
//     runs;
//   - is preceded by a read of the repository's config (git config
//     --list --includes, which starts no program) and refused with
//     ErrUntrustedConfig when it sets any key outside an allow-list of
//     keys that name no program and no path outside the repository
//     (what git init and clone write, remotes, branches, insteadOf,
//     identity, and settings such as pull.rebase): what is not known to
//     be safe is refused, not guessed. git config itself is not
//     refused, so that a config can be read and mended.
//
// On an isolated runtime the repository's config is obeyed as it is:
// whatever it runs stays inside the sandbox that wrote it.
//
// What is left: a process that rewrites .git/config between the read and
// the command (a sandbox still running on the same given workspace) can
// add a filter or driver that the command then obeys. Close such a
// sandbox before running git on its workspace from the host.
//
// # Errors
//
// A git command that fails is an *Error carrying git's message and
// Result, classified as ErrNotRepository, ErrConflict, ErrAuthentication,
// ErrUnreachable, ErrRejected, ErrNothingToCommit, ErrLocalChanges,
// ErrExists, ErrUntrustedConfig or execbox.ErrNotFound (a missing ref or path), each matched
// with errors.Is; the git kinds also match the execbox kind that fits.
// Invalid options are *execbox.FieldError (execbox.ErrInvalidArgument),
// all reported at once. Errors of the sandbox (closed, context ended)
// pass through wrapped.
//
// # Parallel tasks
//
// Repo.Parallel runs N tasks, each in a new worktree on a new branch from
// one base commit, sequentially or up to MaxConcurrent at once (config
// keys execution.mode and execution.max_concurrent). Results come back
// per task; a failing task does not stop or disturb the others; its
// worktree is removed when it ends unless Keep is set, and with Commit set
// its work is committed on its branch first. Prepare chooses between a
// repository already in the workspace and a fresh clone.
//
// # Remote sandboxes
//
// A sandbox that implements Delegate (client.Sandbox, hence the remote
// runtime's sandboxes and the agent-backed ones of the sandbox and docker
// runtimes) runs each operation of Init, Clone, Status, Diff, Log, Add,
// Commit, Checkout, Push, Fetch, Pull and the worktree methods in one
// call: the execbox server or agent runs it with Do where the sandbox is
// (POST git/{op}), and the result or *Error comes back as in process. The
// credentials travel in that request's body, to be used there as above.
// A Client whose Options set Git, Home, Env, EnvPolicy or EnvAllow runs
// command by command, as against a server older than POST git/{op}
// (ErrNotDelegated).
package git
