package execbox

import (
	"context"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"
)

// SessionKind is the interpreter behind a session.
type SessionKind string

const (
	// SessionBash is a long-lived bash: the working directory, variables
	// (exported or not), functions, aliases, shell options, $? and
	// background jobs persist from one Run to the next. The shell is
	// interactive, as at a terminal prompt, with job control: `exit` (or
	// `set -e` and a failing command) ends the session; bash reports
	// background jobs as it does at a prompt ("[1] 1234" when one starts,
	// "[1]+ Done ..." on the stderr of the command during which it
	// notices one ended). What a command does with exec to its standard
	// input, output and error lasts for that command only; other
	// descriptors it opens persist.
	SessionBash SessionKind = "bash"
	// SessionPython is a long-lived Python interpreter: variables, imports
	// and definitions persist between cells, which run in a __main__
	// module with the working directory first on sys.path, as in the
	// REPL. SystemExit is reported as an exception and the session goes
	// on (as in Jupyter); os._exit ends it. A timeout's SIGINT goes to the
	// interpreter's whole process group, as Ctrl-C at a terminal: a
	// server a cell starts survives later timeouts only in a session of
	// its own (start_new_session=True).
	SessionPython SessionKind = "python"
	// SessionPTY is a program on a pseudo-terminal, for programs that need
	// one (editors, REPLs, password prompts): raw bytes in with Write,
	// raw bytes out as Events.
	SessionPTY SessionKind = "pty"
)

func (k SessionKind) valid() bool {
	switch k {
	case SessionBash, SessionPython, SessionPTY:
		return true
	}
	return false
}

// Default terminal size of a PTY session.
const (
	DefaultRows = 24
	DefaultCols = 80
)

// SessionOpener is implemented by a Sandbox that supports sessions; find
// it with a type assertion, or call OpenSession, which does. Runtimes
// without sessions stay valid Sandboxes.
type SessionOpener interface {
	// OpenSession starts a session. ctx bounds the start only (the
	// interpreter's start-up, up to its first prompt); the session lives
	// until Close, its interpreter exits, or the sandbox is closed.
	OpenSession(ctx context.Context, opts SessionOptions) (Session, error)
	// Sessions lists the sandbox's sessions that have not been closed,
	// oldest first, including those whose interpreter has exited.
	Sessions(ctx context.Context) ([]SessionInfo, error)
	// Session returns an open session by ID, for clients that reconnect;
	// an unknown or closed ID is ErrNotFound.
	Session(ctx context.Context, id string) (Session, error)
}

// OpenSession opens a session in sb, or returns ErrUnsupported if sb's
// runtime has no sessions.
func OpenSession(ctx context.Context, sb Sandbox, opts SessionOptions) (Session, error) {
	so, ok := sb.(SessionOpener)
	if !ok {
		return nil, fmt.Errorf("sandbox %s: sessions: %w", sb.ID(), ErrUnsupported)
	}
	return so.OpenSession(ctx, opts)
}

// SessionOptions describe a session. The zero value is not valid: Kind is
// required. Every other zero field means the default, as for ExecRequest:
// the environment, limits and user come from the sandbox's Spec, overridden
// field by field, and are checked the same way as Exec's.
type SessionOptions struct {
	// Kind is the interpreter: bash, python or pty.
	Kind SessionKind
	// Command is the program, found in the session's PATH: for
	// SessionBash the bash binary alone (default ["bash"]; bash 4 or
	// later), for SessionPython the interpreter, optionally followed by
	// interpreter options (default ["python3"]; Python 3.8 or later), for
	// SessionPTY the program and its arguments (default
	// DefaultPTYCommand).
	Command []string

	// Dir is the initial working directory, inside the workspace as for
	// ExecRequest.Dir. Empty means the workspace.
	Dir string
	// Env, EnvPolicy and EnvAllow are as for ExecRequest.
	Env       map[string]string
	EnvPolicy EnvPolicy
	EnvAllow  []string
	// Limits override the sandbox's limits. They apply to the interpreter
	// and to every process it starts, as for Exec: a CPU time limit counts
	// the interpreter's own time over the session's whole life.
	Limits Limits
	// User overrides the sandbox's user.
	User *User

	// Rows and Cols are the initial size of a PTY session's terminal; zero
	// means DefaultRows and DefaultCols. Other kinds ignore them.
	Rows int
	Cols int
	// EventWindow is how many bytes of a PTY session's events are kept
	// for re-reading; zero means DefaultEventWindow. Other kinds ignore it.
	EventWindow int64
	// FlowControl makes a PTY session's events lose nothing, as
	// ExecRequest.FlowControl does a process's: the program's writes to
	// its terminal block while EventWindow bytes wait for a reader. Other
	// kinds ignore it.
	FlowControl bool

	// GracePeriod is how long a timed-out command has, after SIGINT, to
	// stop before it is killed; and how long Close waits between SIGTERM
	// and SIGKILL. Zero means DefaultGracePeriod.
	GracePeriod time.Duration
}

// DefaultPTYCommand is the program of a PTY session without a Command.
var DefaultPTYCommand = []string{"bash", "-i"}

// Validate reports every problem of o at once, as *FieldError values
// joined with errors.Join. It checks what can be checked without a sandbox.
func (o *SessionOptions) Validate() error {
	var errs []error
	switch {
	case o.Kind == "":
		errs = append(errs, Invalid("kind", "is required (bash, python or pty)"))
	case !o.Kind.valid():
		errs = append(errs, Invalid("kind", "unknown kind %q (want bash, python or pty)", o.Kind))
	}
	if len(o.Command) > 0 && o.Command[0] == "" {
		errs = append(errs, Invalid("command[0]", "must not be empty"))
	}
	if o.Kind == SessionBash && len(o.Command) > 1 {
		errs = append(errs, Invalid("command", "a bash session takes only the path of bash, no arguments"))
	}
	for i, a := range o.Command {
		if strings.IndexByte(a, 0) >= 0 {
			errs = append(errs, Invalid(fmt.Sprintf("command[%d]", i), "contains a NUL byte"))
		}
	}
	if strings.IndexByte(o.Dir, 0) >= 0 {
		errs = append(errs, Invalid("dir", "contains a NUL byte"))
	}
	errs = append(errs, validateEnv("env", o.Env, o.EnvPolicy, o.EnvAllow)...)
	errs = append(errs, o.Limits.validate("limits.")...)
	if o.Rows < 0 || o.Rows > 0xffff {
		errs = append(errs, Invalid("rows", "must be between 1 and 65535"))
	}
	if o.Cols < 0 || o.Cols > 0xffff {
		errs = append(errs, Invalid("cols", "must be between 1 and 65535"))
	}
	if o.EventWindow < 0 {
		errs = append(errs, Invalid("event_window", "must not be negative"))
	}
	if o.GracePeriod < 0 {
		errs = append(errs, Invalid("grace_period", "must not be negative"))
	}
	return joinProblems(errs)
}

// SessionInfo describes a session, as Sessions lists it.
type SessionInfo struct {
	ID      string
	Kind    SessionKind
	Command []string // the program as started, resolved
	Created time.Time
	// Busy: a Run is in progress (or queued).
	Busy bool
	// Exited: the interpreter has ended; every call but Close and Wait
	// returns ErrClosed.
	Exited bool
}

// Session is a long-lived interpreter in a sandbox. Its methods are safe
// for concurrent use. Which methods apply depends on the Kind; the others
// return ErrUnsupported:
//
//   - bash and python: Run.
//   - pty: Write, Resize, Events.
//   - all: ID, Kind, Wait, Close.
//
// Once the interpreter has ended (the command ran `exit`, the program
// quit, a timed-out command could not be stopped without killing it),
// every call but Wait and Close returns an error matching ErrClosed that
// says why.
//
// A SessionResult is only as trustworthy as the commands that ran in the
// session before it. What a command prints never forges a result (the
// interpreter reports on a channel of its own, see
// internal/agent/session), but a command's code is the interpreter's:
// it can change what every later command does and reports. In bash, a
// function named builtin, eval or printf makes later commands report any
// status and output; in Python, a cell can reach the driver's frames and
// replace a later cell's result. That stays inside the session (one
// interpreter of one sandbox). A result that must be trusted, a grader's
// check after an agent's commands, comes from Exec (a new process) or a
// new session, never from a session that untrusted code has run in.
type Session interface {
	// ID identifies the session within its sandbox.
	ID() string
	// Kind is the session's kind.
	Kind() SessionKind

	// Run runs one command (bash) or cell (python) to completion and
	// returns what it did. Calls are serialised: a Run made while another
	// is in progress waits for it, in the order the calls were made, and
	// its ctx bounds the wait; its Timeout starts when it runs. A timeout
	// or a cancelled ctx interrupts the command the way Ctrl-C does
	// (SIGINT to its foreground process group), then kills that group
	// after the grace period; the session and its state live on, and the
	// Result says ReasonTimedOut (ReasonKilled, with ctx's error, for a
	// cancelled ctx). If the interpreter itself ends during the command,
	// Run returns what the command printed and an error matching
	// ErrClosed.
	Run(ctx context.Context, req SessionRequest) (SessionResult, error)

	// Write types p into the terminal of a PTY session.
	Write(ctx context.Context, p []byte) (int, error)
	// Resize sets the terminal's size; the program gets SIGWINCH.
	Resize(ctx context.Context, rows, cols int) error
	// Events yields the terminal's output (EventStdout) and finally the
	// exit event, as Process.Events does, with the same sequence numbers
	// and re-reading from a sequence number.
	Events(ctx context.Context, from uint64) iter.Seq2[Event, error]

	// Wait waits for the interpreter to end and returns its Result: its
	// exit status, and what it printed itself outside commands (for a PTY
	// session, Stdout holds the tail of what the terminal printed).
	// Cancelling ctx stops waiting, not the session.
	Wait(ctx context.Context) (Result, error)
	// Close ends the session: the interpreter and every process it
	// started (background jobs included) get SIGTERM, then SIGKILL after
	// the grace period. A Run in progress returns ErrClosed. Close is
	// idempotent; the sandbox's Close closes every session.
	Close() error
}

// SessionRequest is one command of a bash session or one cell of a
// Python session.
type SessionRequest struct {
	// Code is the command line(s) for bash, any text a bash script may
	// hold (several lines, heredocs, functions...); or the Python source
	// of a cell. It reaches the interpreter out of band, never through its
	// input: a syntax error or an unterminated quote or heredoc is the
	// command's error (bash exits 2, Python raises SyntaxError), never a
	// hung session.
	Code string
	// Stdin, if set, is the command's standard input, read to EOF. Nil
	// means empty input (/dev/null). execbox never closes it.
	Stdin io.Reader
	// Timeout bounds the command's wall-clock time. Zero means
	// DefaultTimeout; negative is invalid.
	Timeout time.Duration
	// OutputLimit caps the bytes kept per stream, as for ExecRequest; it
	// also caps a Python cell's Value. Zero means DefaultOutputLimit.
	OutputLimit int64
}

// Validate reports every problem of r at once.
func (r *SessionRequest) Validate() error {
	var errs []error
	if strings.IndexByte(r.Code, 0) >= 0 {
		errs = append(errs, Invalid("code", "contains a NUL byte"))
	}
	if r.Timeout < 0 {
		errs = append(errs, Invalid("timeout", "must not be negative"))
	}
	if r.OutputLimit < 0 {
		errs = append(errs, Invalid("output_limit", "must not be negative"))
	}
	return joinProblems(errs)
}

// SessionResult is what one command or cell did. Like Result, it is data:
// a failing command, an exception or a timeout is reported here with a nil
// error.
type SessionResult struct {
	// Reason is ReasonExited when the command ran to its end (whatever
	// its status), ReasonTimedOut when its timeout interrupted it,
	// ReasonKilled when the caller's ctx or Close did.
	Reason Reason
	// ExitCode is bash's $? after the command (128+N when signal N ended
	// its last pipeline, 130 after an interrupt). For Python it is 0, or 1
	// when the cell raised an exception.
	ExitCode int

	// Stdout and Stderr are the command's own streams, kept apart and
	// capped as for Exec. What a background job started by the command
	// prints after the command returned is read and discarded.
	Stdout Output
	Stderr Output

	// Value is the repr of the value of a Python cell's last statement,
	// when that is an expression whose value is not None (as the REPL
	// prints it); else empty. It is cut to OutputLimit bytes.
	Value string
	// Exception is the exception a Python cell raised (KeyboardInterrupt
	// after a timeout), or nil. It is data about the cell, not an error
	// of execbox: hence not called Error.
	Exception *Exception

	// Duration is the wall-clock time of the command.
	Duration time.Duration
}

// Success reports whether the command ran to its end with status 0 (and,
// for Python, without an exception).
func (r *SessionResult) Success() bool {
	return r.Reason == ReasonExited && r.ExitCode == 0 && r.Exception == nil
}

// TimedOut reports whether the timeout interrupted the command.
func (r *SessionResult) TimedOut() bool { return r.Reason == ReasonTimedOut }

// Exception is an exception raised by a Python cell.
type Exception struct {
	// Type is the exception's class name, e.g. "ZeroDivisionError", with
	// its module unless it is a builtin ("json.decoder.JSONDecodeError").
	Type string
	// Message is str() of the exception.
	Message string
	// Traceback is the formatted traceback, as Python prints it, without
	// the frames of execbox's own driver; source lines of earlier cells
	// are shown.
	Traceback string
}

func (e *Exception) String() string { return e.Type + ": " + e.Message }
