// Package proc starts one process of the agent and sees it through to its
// Result. Its caller (package agent) has resolved everything first: Start
// takes complete Options (an absolute Path, the whole environment, the
// directory, the credential, the bounds) and adds nothing but the marker.
//
// What a Process does, from Start to Result:
//
//   - Output capture within a bound: each stream keeps at most
//     OutputLimit bytes, the head and the tail of what the program wrote,
//     in one buffer that never grows past the limit, and counts what it
//     left out between them (execbox.Output). With KillOnOutputLimit,
//     going over ends the command (ReasonOutputLimit) instead. A
//     background child that keeps a pipe open does not hold the Result
//     back, nor ever block: the pipe is drained after the Result.
//     Capture keeps other streams (a session's commands) the same way.
//   - Tree kill: every process of the command inherits a marker in its
//     environment (MarkerVar), so a timeout, Stop or KillMarked (a whole
//     sandbox) finds the process group, the descendants and anything
//     marked, even after setsid or a double fork, and ends them: SIGTERM,
//     the grace period, then SIGKILL until none is left. A Scope (the
//     sandbox runtime's cgroup per command) starts the process, adds
//     those that scrubbed their environment, and amends the Result (an
//     OOM kill, the peak memory).
//   - Rlimits through a re-exec shim: Go cannot run code between fork and
//     exec, so a command with rlimits, with DropCapabilities, or started
//     while this process holds a descriptor without close-on-exec runs
//     as a re-exec of the current binary (/proc/self/exe), which this
//     package's init recognises: it sets the limits on itself (and drops
//     the capabilities, marks the descriptors), then execs the program.
//     A program the shim cannot exec fails Start as a direct exec would.
//   - Events: with an EventWindow, the output and the exit are also an
//     ordered log with sequence numbers across both streams, re-readable
//     from any number still in the window (Events).
//   - The Result: how the process ended (exited, signaled, timed out, a
//     CPU limit, the output limit, killed), both outputs, the duration,
//     the CPU time and the peak memory.
//
// A Terminal runs the process on a new pseudo-terminal, as a session
// leader with job control (PTY and bash sessions).
package proc
