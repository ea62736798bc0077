package git

import (
	"fmt"
	"strings"

	"github.com/execbox/execbox"
)

// Error kinds of git failures, matched with errors.Is. Several also match
// the execbox kind that fits, so code that only knows execbox's kinds
// still decides well: ErrNotRepository is an execbox.ErrNotFound,
// ErrAuthentication an execbox.ErrPermission, ErrUnreachable an
// execbox.ErrUnavailable. A reference, path or remote branch that does not
// exist is execbox.ErrNotFound itself.
var (
	// ErrNotRepository: the directory does not exist or is not inside a
	// git working tree.
	ErrNotRepository error = &sentinel{"not a git repository", execbox.ErrNotFound}
	// ErrConflict: a merge, rebase or pull stopped on conflicts (or cannot
	// start because of unresolved ones). Error.Conflicts lists the paths;
	// Status gives the details.
	ErrConflict error = &sentinel{"merge conflict", nil}
	// ErrAuthentication: the remote refused the credentials, or asked for
	// some and none were given.
	ErrAuthentication error = &sentinel{"authentication failed", execbox.ErrPermission}
	// ErrUnreachable: the remote could not be reached (name resolution,
	// connection, TLS, timeout) or has no repository at that URL. GitHub
	// answers "not found" for a private repository the credentials cannot
	// read, so check them too.
	ErrUnreachable error = &sentinel{"remote unreachable", execbox.ErrUnavailable}
	// ErrRejected: the remote refused a push (not a fast-forward, a
	// protected branch, a hook). Fetch and merge, then push again.
	ErrRejected error = &sentinel{"push rejected", nil}
	// ErrNothingToCommit: Commit found no change to record.
	ErrNothingToCommit error = &sentinel{"nothing to commit", nil}
	// ErrLocalChanges: uncommitted changes would be overwritten by a
	// checkout, merge or pull. Commit or discard them first.
	ErrLocalChanges error = &sentinel{"local changes would be overwritten", nil}
	// ErrExists: a branch, worktree or clone destination already exists.
	ErrExists error = &sentinel{"already exists", nil}
	// ErrUntrustedConfig: on a sandbox without isolation (the local
	// runtime, where git runs on the host), the repository's own
	// configuration sets a key that is not known to be safe there (a
	// key that can name a program: core.fsmonitor, a filter, a diff
	// driver, core.sshCommand, core.worktree, an include...). Remove the
	// key, or run git on an isolated runtime. See the package
	// documentation ("Repositories written by untrusted code").
	ErrUntrustedConfig error = &sentinel{"untrusted repository configuration", execbox.ErrPermission}
)

// sentinel is an error kind that may refine an execbox kind.
type sentinel struct {
	msg    string
	parent error
}

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Unwrap() error { return s.parent }

// Error is a git command that did not succeed. It carries git's own
// message and what the command did; every secret is already redacted.
type Error struct {
	// Op is the operation: "clone", "push", "worktree add", ...
	Op string
	// Dir is the directory git ran in, relative to the workspace.
	Dir string
	// Args is git's argv after the program name.
	Args []string
	// Result is what the command did (exit code, output, timeout).
	Result execbox.Result
	// Kind is the sentinel the failure was classified as (ErrConflict,
	// ErrAuthentication, ..., or execbox.ErrNotFound), or nil.
	Kind error
	// Message is git's message: its standard error, or its standard
	// output when that is empty, trimmed to the last 4 KiB.
	Message string
	// Conflicts lists the conflicted paths when Kind is ErrConflict.
	Conflicts []string
}

// Error returns "git OP [in DIR]: MESSAGE".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("git ")
	b.WriteString(e.Op)
	if e.Dir != "" && e.Dir != "." {
		fmt.Fprintf(&b, " in %s", e.Dir)
	}
	b.WriteString(": ")
	if e.Result.Reason != "" && e.Result.Reason != execbox.ReasonExited {
		b.WriteString(e.Result.String())
		if e.Message != "" {
			b.WriteString(": ")
		}
	}
	switch {
	case e.Message != "":
		b.WriteString(e.Message)
	case e.Result.Reason == execbox.ReasonExited:
		b.WriteString(e.Result.String())
	}
	return b.String()
}

// Unwrap returns Kind, so errors.Is matches it and its execbox kind.
func (e *Error) Unwrap() error { return e.Kind }

// maxMessage bounds Error.Message.
const maxMessage = 4 << 10

func newError(op, dir string, args []string, res execbox.Result) *Error {
	stderr := strings.TrimSpace(res.Stderr.Text())
	stdout := strings.TrimSpace(res.Stdout.Text())
	msg := stderr
	if msg == "" {
		msg = stdout
	}
	if len(msg) > maxMessage {
		msg = "..." + strings.ToValidUTF8(msg[len(msg)-maxMessage:], "")
	}
	e := &Error{Op: op, Dir: dir, Args: args, Result: res, Message: msg}
	if res.Reason == execbox.ReasonExited {
		e.Kind = classify(stderr + "\n" + stdout)
	}
	if e.Kind == ErrConflict {
		e.Conflicts = conflictPaths(stdout + "\n" + stderr)
	}
	return e
}

// patterns map git's messages (LC_ALL=C) to kinds, checked in order.
var patterns = []struct {
	kind  error
	texts []string
}{
	{ErrAuthentication, []string{
		"authentication failed", "could not read username", "could not read password",
		"terminal prompts disabled", "http basic: access denied", "returned error: 401",
		"returned error: 403", "permission denied (publickey", "invalid username or password",
		"invalid credentials",
	}},
	{ErrNotRepository, []string{"not a git repository (", "fatal: not a git repository"}},
	{ErrUnreachable, []string{
		"could not resolve host", "failed to connect", "connection refused", "connection timed out",
		"connection reset", "network is unreachable", "no route to host", "could not read from remote repository",
		"does not appear to be a git repository", "repository not found", "fatal: repository '", "ssl certificate problem",
		"unable to access", "the remote end hung up unexpectedly", "returned error: 404", "operation timed out",
	}},
	{ErrLocalChanges, []string{
		"your local changes to the following files would be overwritten",
		"untracked working tree files would be overwritten", "please commit your changes or stash them",
		"cannot pull with rebase: you have unstaged changes", "cannot rebase: you have unstaged changes",
	}},
	{ErrConflict, []string{
		"conflict (", "automatic merge failed", "fix conflicts", "unmerged files", "you have unmerged paths",
		"could not apply", "resolve all conflicts",
	}},
	{ErrRejected, []string{"[rejected]", "[remote rejected]", "failed to push some refs", "non-fast-forward"}},
	{ErrNothingToCommit, []string{"nothing to commit", "nothing added to commit", "no changes added to commit"}},
	{ErrExists, []string{"already exists"}},
	{execbox.ErrNotFound, []string{
		"invalid reference", "did not match any file(s) known to git", "unknown revision", "bad revision",
		"needed a single revision", "couldn't find remote ref", "not a valid object name", "not found in upstream",
		"does not have any commits yet", "did not match any", "no such ref", "not a valid ref", "is not a working tree",
		"no upstream configured", "no such remote", "not a commit",
	}},
}

// classify returns the kind git's message text says, or nil.
func classify(text string) error {
	t := strings.ToLower(text)
	for _, p := range patterns {
		for _, s := range p.texts {
			if strings.Contains(t, s) {
				return p.kind
			}
		}
	}
	return nil
}

// conflictPaths extracts the paths of "CONFLICT (...): Merge conflict in
// PATH" and similar lines.
func conflictPaths(out string) []string {
	var paths []string
	for line := range strings.SplitSeq(out, "\n") {
		if !strings.HasPrefix(line, "CONFLICT (") {
			continue
		}
		if _, p, ok := strings.Cut(line, "Merge conflict in "); ok {
			paths = append(paths, strings.TrimSpace(p))
		}
	}
	return paths
}
