package execbox

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Reason says why a command ended. Exactly one applies.
type Reason string

const (
	// ReasonExited: the program exited by itself; ExitCode is its code.
	ReasonExited Reason = "exited"
	// ReasonSignaled: a signal the program did not expect from execbox killed it.
	ReasonSignaled Reason = "signaled"
	// ReasonTimedOut: the timeout passed and execbox killed the tree.
	ReasonTimedOut Reason = "timed_out"
	// ReasonOOMKilled: the memory limit was exceeded.
	ReasonOOMKilled Reason = "oom_killed"
	// ReasonCPULimit: the CPU time limit was exceeded.
	ReasonCPULimit Reason = "cpu_limit"
	// ReasonOutputLimit: a stream passed OutputLimit with KillOnOutputLimit set.
	ReasonOutputLimit Reason = "output_limit"
	// ReasonKilled: Kill, Close or the caller's context ended the command.
	ReasonKilled Reason = "killed"
	// ReasonError: execbox lost track of the command (infrastructure
	// failure); Result.Detail says what happened.
	ReasonError Reason = "error"
)

// Signal is a Linux signal number. Runtimes are Linux, so numbers are
// Linux's on every client platform.
type Signal int

// Common signals.
const (
	SIGHUP  Signal = 1
	SIGINT  Signal = 2
	SIGQUIT Signal = 3
	SIGABRT Signal = 6
	SIGKILL Signal = 9
	SIGSEGV Signal = 11
	SIGPIPE Signal = 13
	SIGALRM Signal = 14
	SIGTERM Signal = 15
	SIGXCPU Signal = 24
	SIGXFSZ Signal = 25
)

var signalNames = map[Signal]string{
	1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
	7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2",
	13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD",
	18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU",
	23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF",
	28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS",
}

// String returns the signal's name, e.g. "SIGKILL", or "" for 0.
func (s Signal) String() string {
	if s == 0 {
		return ""
	}
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(s))
}

// ParseSignal accepts "KILL", "SIGKILL", "sigkill" or "9".
func ParseSignal(s string) (Signal, error) {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return Signal(n), nil
	}
	u := strings.ToUpper(s)
	if !strings.HasPrefix(u, "SIG") {
		u = "SIG" + u
	}
	for n, name := range signalNames {
		if name == u {
			return n, nil
		}
	}
	return 0, Invalid("signal", "unknown signal %q", s)
}

// Result is what a command did. It is data, not an error: a timeout, a
// signal or a limit is reported here and Exec returns a nil error.
// Its JSON form, as the HTTP API and the CLI's --json print it, is
// package api's Result (api.NewResult).
type Result struct {
	// Reason says why the command ended.
	Reason Reason
	// ExitCode is the program's exit status when Reason is ReasonExited
	// (or it exited by itself after a timeout's SIGTERM), else -1.
	ExitCode int
	// Signal is the signal that killed the program, or 0.
	Signal Signal
	// Detail explains ReasonError and limit kills in words.
	Detail string

	Stdout Output
	Stderr Output

	// Duration is the wall-clock time from start to exit.
	Duration time.Duration
	// UserTime and SystemTime are the CPU time of the program and of the
	// descendants it waited for.
	UserTime   time.Duration
	SystemTime time.Duration
	// PeakMemory is the largest resident set in bytes (for a cgroup
	// runtime, of the whole sandbox during the command; otherwise of the
	// largest single process).
	PeakMemory int64
	// Shell names the shell that ran a shell-form command
	// (ExecRequest.Shell): "bash" where the sandbox has /bin/bash, else
	// "sh". Empty for an argv command.
	Shell string
}

// CPUTime is UserTime + SystemTime.
func (r *Result) CPUTime() time.Duration { return r.UserTime + r.SystemTime }

// Success reports whether the command exited with status 0.
func (r *Result) Success() bool { return r.Reason == ReasonExited && r.ExitCode == 0 }

// TimedOut reports whether the timeout ended the command.
func (r *Result) TimedOut() bool { return r.Reason == ReasonTimedOut }

// OOMKilled reports whether the memory limit ended the command.
func (r *Result) OOMKilled() bool { return r.Reason == ReasonOOMKilled }

// ShellExitCode maps the result to the exit status a shell would report:
// the exit code, 128+N for a signal, 124 for a timeout (as GNU timeout),
// 125 for an infrastructure error.
func (r *Result) ShellExitCode() int {
	switch {
	case r.Reason == ReasonTimedOut:
		return 124
	case r.Reason == ReasonError:
		return 125
	case r.ExitCode >= 0:
		return r.ExitCode
	case r.Signal > 0:
		return 128 + int(r.Signal)
	}
	return 125
}

// String summarises the outcome in a few words, e.g. "exited 1" or
// "timed_out (SIGTERM)".
func (r *Result) String() string {
	switch {
	case r.Reason == ReasonExited:
		return fmt.Sprintf("exited %d", r.ExitCode)
	case r.Signal != 0:
		return fmt.Sprintf("%s (%s)", r.Reason, r.Signal)
	case r.Detail != "":
		return fmt.Sprintf("%s: %s", r.Reason, r.Detail)
	}
	return string(r.Reason)
}

// Output is what one stream carried. When the program wrote more than the
// limit, Data holds the first half of the limit and the last half, and
// Omitted counts the bytes dropped between them at offset OmittedAt.
// Data holds the raw bytes: it may not be valid UTF-8.
type Output struct {
	Data      []byte
	Total     int64
	Omitted   int64
	OmittedAt int
	// HeldOpen reports that when the Result was made, a process the
	// command left running (a background job, a daemon) still held the
	// stream open: Data and Total are everything written until then,
	// and what it writes later is in no Result.
	HeldOpen bool
}

// Truncated reports whether bytes were dropped.
func (o Output) Truncated() bool { return o.Omitted > 0 }

// Text returns Data as valid UTF-8 (invalid bytes become U+FFFD) with a
// one-line marker where bytes were omitted.
func (o Output) Text() string {
	if o.Omitted == 0 {
		return strings.ToValidUTF8(string(o.Data), "\uFFFD")
	}
	at := min(max(o.OmittedAt, 0), len(o.Data))
	return strings.ToValidUTF8(string(o.Data[:at]), "\uFFFD") +
		fmt.Sprintf("\n[... %d bytes omitted ...]\n", o.Omitted) +
		strings.ToValidUTF8(string(o.Data[at:]), "\uFFFD")
}

// String is Text.
func (o Output) String() string { return o.Text() }
