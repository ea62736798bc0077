// Package execboxtest is the conformance suite of execbox runtimes, as
// testing/fstest is for file systems: every guarantee execbox makes to
// its callers (see Guarantees), checked the same way against any
// execbox.Runtime.
//
// A runtime's tests call Run with a healthy runtime:
//
//	func TestConformance(t *testing.T) {
//		execboxtest.Run(t, execboxtest.Config{Runtime: local.New(local.Options{})})
//	}
//
// An isolated runtime skips where it cannot work (RequireAvailable: a
// skip that EXECBOX_TEST_REQUIRE=all, as in CI, turns into a failure),
// allows for the time it takes to reach its boundary, and checks after
// every Close what only it can see, as the sandbox runtime does:
//
//	func TestConformance(t *testing.T) {
//		rt := sandbox.New(sandbox.Options{})
//		execboxtest.RequireAvailable(t, rt)
//		execboxtest.Run(t, execboxtest.Config{
//			Runtime:    rt,
//			Slack:      3 * time.Second,
//			AfterClose: func(t *testing.T, sb execbox.Sandbox) { /* its cgroups, mounts and init are gone */ },
//		})
//	}
//
// Config.Spec, if set, gives every sandbox the suite creates a base spec
// (labels, default limits) under what each subtest adds.
//
// Run starts one subtest per guarantee (ExitCodes, Signal, Timeout,
// TimeoutKillsTree, CloseKillsEverything, LargeOutput, EnvPolicy,
// PathConfinement, BadRequests, ...), most in parallel, each creating its
// own sandboxes and closing them with t.Cleanup, checking Close's error.
// The whole suite takes a few seconds on the local runtime.
//
// # Commands
//
// Commands must run on any Linux runtime, including containers and
// namespaces where the test binary is not visible, so the suite runs only
// /bin/sh and coreutils (sleep, cat, head, printf, dd, yes, env, id,
// mkdir, ln, readlink, rm, pwd). setsid (util-linux) is used when present.
//
// # Capabilities
//
// Limit tests follow Runtime.Capabilities: a claimed capability is
// enforced (CPU time ends a busy loop with ReasonCPULimit, Memory ends a
// hog with ReasonOOMKilled, PIDs stops a fork loop), and every limit not
// claimed is refused with ErrUnsupported naming the field, never silently
// ignored. There is no list of subtests to skip: a runtime that cannot keep
// a guarantee is not conformant, and what it legitimately cannot enforce is
// what Capabilities says. Every sandbox reports the same Capabilities as
// its runtime, before and after Close (the subtest Capabilities), since
// callers such as package code choose limits from the sandbox alone. While fixing a failure, use
// go test -skip.
//
// # Guarantees
//
// Failures name the guarantee they break by its number:
//
//  1. The exit code is the program's; a signal death and a timeout are
//     reported as such.
//  2. After a timeout, Kill or Close, no process the command started is
//     left, including ones that called setsid or double-forked.
//  3. Output that is not UTF-8 does not crash anything; raw bytes stay
//     available; output larger than the limit is cut, flagged, and never
//     held in memory beyond the limit.
//  4. A bad request (missing command, negative timeout, path outside the
//     workspace, NUL byte, unknown runtime) gets a clear error naming the
//     field; nothing is half-created.
//  5. Secrets in the host environment do not reach the command unless
//     passed on purpose.
//  6. Closing a sandbox leaves no processes, cgroups, mounts, containers
//     or temporary directories behind (and never removes a given
//     workspace).
//  7. Nothing inside a sandbox reaches the host, the agent or another
//     tenant; the file API is no confused deputy: whoever serves it does
//     nothing in the workspace that the sandbox's user could not.
//  8. Every guarantee holds on every host kind the runtime claims to
//     support; the sandbox runtime's VM matrix (make test-vm) runs the
//     suite on each.
//
// # Sessions
//
// RunSessions is the suite of execbox.SessionOpener, run separately by
// runtimes whose sandboxes have sessions: local in process, sandbox
// through its agent, remote through a server.
//
// # Leftover processes
//
// Guarantee 2 (nothing survives a timeout, Kill or Close) is checked from
// two sides. Inside the sandbox, the process tree records its PIDs in the
// workspace and a new command checks that none still runs (zombies, which
// their adopter has to reap, do not count). From the host, each command
// under test carries a unique environment variable (EXECBOX_CONFORMANCE_MARK),
// and the suite scans /proc for it: this sees the processes of the local
// runtime and those of namespace and container runtimes on the same
// machine, under their host PIDs, even after the sandbox is gone. The host
// check first makes sure it sees the running processes; where it cannot
// (a remote engine), it is skipped with a log line, except for a runtime
// without isolation, whose processes must be visible. After Close of an
// isolated sandbox nothing can run inside it any more, so anything beyond
// processes (containers, cgroups, mounts) is for Config.AfterClose.
//
// # Environment
//
// Run puts a unique secret in the test process's environment. Without
// isolation that is the host environment a runtime inherits: it must reach
// a command under EnvInherit or EnvAllow naming it, and never under the
// default. An isolated runtime's inherited environment is its agent's, so
// the secret must never reach it; the policies are then checked against a
// variable found in that environment.
package execboxtest
