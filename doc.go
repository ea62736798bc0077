// Package execbox is the one Go API over every runtime that runs commands
// written by AI agents: a command runs in a workspace, within limits, and
// what it did comes back exactly (exit code or signal, timeout,
// out-of-memory kill, stdout and stderr capped but never lost at the end,
// duration, CPU time, peak memory). The calls are the same whatever
// runtime is behind them: switching runtime is one name.
//
// # Concepts
//
// A Runtime is a backend that creates sandboxes ("local", "sandbox",
// "remote"): Health says whether it works on this machine and what is
// missing, Capabilities what it enforces, and Create builds a Sandbox
// from a Spec (workspace, snapshot, assets, setup commands, default
// environment, limits and user).
//
// A Sandbox is one live environment around one workspace. Exec runs a
// command to completion; Start starts one and returns a Process (ordered
// events, stdin, signals, Kill, Wait); Files reads and writes the
// workspace; Snapshot writes it as tar; Close kills everything the
// sandbox started and removes what Create made.
//
// An ExecRequest is one command: argv (Command) or a shell line (Shell),
// with its stdin, directory, environment policy, timeout, output limit,
// limits and user; zero fields take the defaults, and Validate reports
// every problem at once. A Result is what the command did. It is data,
// not an error: a timeout, a signal or a limit is a Reason in the Result.
// An error from Exec means execbox could not run the command at all, and
// matches one of the error kinds (ErrInvalidArgument, ErrNotFound,
// ErrClosed, ErrUnsupported, ...) with errors.Is, on every runtime and
// across the wire.
//
// Files is the file API of a workspace: every path is resolved inside it,
// and one that leaves it is ErrPermission. A Session is a long-lived
// bash, Python interpreter or program on a terminal, whose state persists
// from one call to the next; OpenSession opens one in a sandbox whose
// runtime has sessions (SessionOpener).
//
// # Choosing a runtime
//
// A runtime's package registers it by name in DefaultRegistry when
// imported: import runtimes/all for every runtime execbox ships, or one
// runtime's package alone. Then Open a runtime by name, with its settings
// in Options, or let OpenDefault choose: the isolated "sandbox" runtime
// where it works on this machine, else "local" (unless isolation is
// required).
//
//	import (
//		"github.com/execbox/execbox"
//		_ "github.com/execbox/execbox/runtimes/all"
//	)
//
//	rt, err := execbox.Open("sandbox", execbox.Options{})
//	...
//	sb, err := rt.Create(ctx, execbox.Spec{})
//	...
//	defer sb.Close()
//	res, err := sb.Exec(ctx, execbox.ExecRequest{Command: []string{"echo", "hi"}})
//
// # Related packages
//
// Package api is this API on the wire: the HTTP protocol of execbox serve,
// and of the agent inside an isolated runtime; package client is its Go
// client. Package execboxtest is the conformance suite: every runtime
// passes it, and a new runtime is one that does. Packages code and git
// build on this API and work on every runtime.
package execbox
