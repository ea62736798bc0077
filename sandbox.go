package execbox

import (
	"context"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"
)

// Runtime is a backend that creates sandboxes: "local", "sandbox",
// "docker", ... Implementations are safe for concurrent use.
type Runtime interface {
	// Name is the name the runtime is registered under.
	Name() string
	// Health reports whether the runtime can create sandboxes here, and if
	// not, what is missing.
	Health(ctx context.Context) Health
	// Capabilities lists what the runtime enforces.
	Capabilities() Capabilities
	// Create builds a sandbox from spec. Assets and setup commands are
	// applied before it returns; on any failure nothing is left behind.
	// A runtime that is not healthy returns ErrUnavailable.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
}

// Health is a runtime's readiness on this machine.
type Health struct {
	Available bool
	Detail    string
}

// Capabilities lists the limits and features a runtime enforces. A request
// asking for a limit whose capability is false fails with ErrUnsupported.
type Capabilities struct {
	// Isolation: commands cannot see or touch the host beyond the workspace.
	Isolation bool
	// Rlimits: CPUTime, FileSize, OpenFiles and AddressSpace.
	Rlimits bool
	// Memory, PIDs and CPUs limits (cgroups), and OOM detection.
	Memory bool
	PIDs   bool
	CPUs   bool
	// User: commands can run as another uid/gid.
	User bool
	// Images: the sandbox's root can be an OCI image (Spec.Image).
	Images bool
}

// CheckLimits returns ErrUnsupported *FieldErrors for every non-zero limit
// of l that caps does not cover. prefix is prepended to field names.
func CheckLimits(runtime string, caps Capabilities, l Limits, prefix string) error {
	var errs []error
	check := func(ok bool, field string, set bool) {
		if set && !ok {
			errs = append(errs, Unsupported(runtime, prefix+field))
		}
	}
	check(caps.Rlimits, "cpu_time", l.CPUTime != 0)
	check(caps.Rlimits, "file_size", l.FileSize != 0)
	check(caps.Rlimits, "open_files", l.OpenFiles != 0)
	check(caps.Rlimits, "address_space", l.AddressSpace != 0)
	check(caps.Memory, "memory", l.Memory != 0)
	check(caps.PIDs, "pids", l.PIDs != 0)
	check(caps.CPUs, "cpus", l.CPUs != 0)
	return joinProblems(errs)
}

// Spec describes a sandbox to create. The zero value is a valid default: a
// fresh temporary workspace, clean environment, no extra limits.
type Spec struct {
	// Workspace is a host directory to use as the workspace. It must exist
	// and is never removed. Empty means a new temporary directory that
	// Close removes. Runtimes with isolation mount it inside the boundary.
	Workspace string
	// AllowSystemWorkspace lets Workspace be /, a system directory (/usr,
	// /etc, /var, /run, ...) or a home directory of root, which runtimes
	// with isolation otherwise refuse (ErrPermission naming "workspace"):
	// a command would write the host's system or root's dotfiles.
	AllowSystemWorkspace bool
	// Image, if set, is the OCI image whose file system is the sandbox's
	// root: a registry reference ("python:3.12-slim",
	// "localhost:5000/team/env@sha256:..."), an OCI image layout
	// directory or a "docker save"/OCI tarball (package image). Its
	// environment, user and working directory are the defaults of every
	// command. Empty: the runtime's own root (the host's system
	// directories on the sandbox runtime). Runtimes without
	// Capabilities.Images refuse it (ErrUnsupported naming "image").
	Image string
	// Snapshot, if set, is a tar stream (from Sandbox.Snapshot) unpacked
	// into the workspace first.
	Snapshot io.Reader
	// Assets are copied into the workspace after the snapshot.
	Assets []Asset
	// Setup commands run in order after the assets, before Create returns.
	// A failing one (non-zero exit, timeout, ...) fails Create with a
	// *SetupError and the sandbox is removed.
	Setup []ExecRequest

	// Env, EnvPolicy and EnvAllow are the defaults of every command.
	Env       map[string]string
	EnvPolicy EnvPolicy
	EnvAllow  []string
	// Limits are the defaults of every command.
	Limits Limits
	// User is the default identity of every command. A temporary workspace
	// is owned by it.
	User *User
	// Labels are free-form metadata, reported back and logged.
	Labels map[string]string

	// Timeout is the sandbox's maximum lifetime, from its creation: once
	// it has passed, the sandbox is closed as Close does. IdleTimeout
	// closes it once it has been idle that long: no call has touched
	// it, no process of it has run and no session of it has been open.
	// Zero means none (execbox serve: its default). They are enforced by
	// execbox serve, and so by the remote runtime; the other runtimes
	// refuse a non-zero one (ErrUnsupported, see CheckServerFields): there
	// the caller owns the sandbox and closes it.
	Timeout     time.Duration
	IdleTimeout time.Duration
	// Pool, if set, names a warm pool of an execbox server to take the
	// sandbox from (the remote runtime): the other fields must then be
	// empty or equal the pool's template, but Env, Labels and Assets
	// with Content, which are bound to the warm sandbox when it is
	// taken. Runtimes without pools refuse it (CheckServerFields).
	Pool string
}

// CheckServerFields returns ErrUnsupported *FieldErrors for the fields
// of s that only execbox serve honours (through the remote runtime): a
// non-zero Timeout or IdleTimeout (a runtime in process does not end
// sandboxes by itself: its caller closes them) and a Pool (it has no
// warm pools). Runtimes refuse them rather than ignore them.
func CheckServerFields(runtime string, s *Spec) error {
	var errs []error
	refuse := func(field string, set bool, why string) {
		if set {
			errs = append(errs, &FieldError{Field: field, Kind: ErrUnsupported, Problem: fmt.Sprintf(why, runtime)})
		}
	}
	const lifetimes = "the %s runtime does not end sandboxes by itself: close the sandbox, or create it through execbox serve (the remote runtime), which does"
	refuse("timeout", s.Timeout != 0, lifetimes)
	refuse("idle_timeout", s.IdleTimeout != 0, lifetimes)
	refuse("pool", s.Pool != "", "the %s runtime has no warm pools; pools are served by execbox serve, through the remote runtime")
	return joinProblems(errs)
}

// ImageCommitter is implemented by sandboxes made from an image
// (Spec.Image) that can save what their commands changed in its root as
// a new image: the image's layers and one more (the sandbox runtime).
// dest is a registry reference to push to, or the path ("/", "./",
// "../") of an OCI image layout directory, with an optional ":tag". The
// workspace is not part of the image: what the next sandboxes need goes
// elsewhere in the root (/opt, /usr/local, a venv outside /workspace),
// or travels as a Snapshot. Commit a sandbox whose commands are done: a
// file written meanwhile may be cut or fail the commit.
type ImageCommitter interface {
	CommitImage(ctx context.Context, dest string) (CommittedImage, error)
}

// CommittedImage is an image CommitImage wrote; Ref can be the
// Spec.Image of other sandboxes.
type CommittedImage struct {
	Ref    string // dest, resolved
	ID     string // "sha256:..." of its configuration
	Digest string // "sha256:..." of its manifest
}

// Asset is a file or tree placed in the workspace at creation. Exactly one
// of Source and Content is set.
type Asset struct {
	// Source is a path on the host running execbox: a file or directory
	// copied recursively (symlinks are copied as links).
	Source string
	// Content is the literal content of a file.
	Content []byte
	// Path is where it goes, relative to the workspace.
	Path string
	// Mode is the permission of a Content file; zero means 0644.
	Mode uint32
}

// Validate reports every problem of s at once.
func (s *Spec) Validate() error {
	var errs []error
	if strings.IndexByte(s.Workspace, 0) >= 0 {
		errs = append(errs, Invalid("workspace", "contains a NUL byte"))
	}
	if strings.IndexByte(s.Image, 0) >= 0 || len(s.Image) > 4096 {
		errs = append(errs, Invalid("image", "is not a reference or path (a NUL byte, or longer than 4096 bytes)"))
	}
	for i, a := range s.Assets {
		if len(errs) > MaxProblems {
			break
		}
		f := fmt.Sprintf("assets[%d]", i)
		switch {
		case a.Source == "" && a.Content == nil:
			errs = append(errs, Invalid(f+".source", "is required (or content)"))
		case a.Source != "" && a.Content != nil:
			errs = append(errs, Invalid(f+".content", "cannot be set together with source"))
		}
		if a.Path == "" {
			errs = append(errs, Invalid(f+".path", "is required"))
		}
		if strings.IndexByte(a.Path, 0) >= 0 {
			errs = append(errs, Invalid(f+".path", "contains a NUL byte"))
		}
		if strings.IndexByte(a.Source, 0) >= 0 {
			errs = append(errs, Invalid(f+".source", "contains a NUL byte"))
		}
		if a.Mode&^0o777 != 0 {
			errs = append(errs, Invalid(f+".mode", "%#o is not a permission (setuid, setgid and sticky bits are not allowed)", a.Mode))
		}
	}
	for i := range s.Setup {
		if len(errs) > MaxProblems {
			break
		}
		if err := s.Setup[i].Validate(); err != nil {
			errs = append(errs, PrefixFields(fmt.Sprintf("setup[%d].", i), err))
		}
	}
	errs = append(errs, validateEnv("env", s.Env, s.EnvPolicy, s.EnvAllow)...)
	errs = append(errs, s.Limits.validate("limits.")...)
	if s.Timeout < 0 {
		errs = append(errs, Invalid("timeout", "must not be negative"))
	}
	if s.IdleTimeout < 0 {
		errs = append(errs, Invalid("idle_timeout", "must not be negative"))
	}
	if s.Pool != "" && !ValidPoolName(s.Pool) {
		errs = append(errs, Invalid("pool", "%q is not a pool name (1-64 of A-Z a-z 0-9 . _ -)", s.Pool))
	}
	return joinProblems(errs)
}

// ValidPoolName reports whether name can name a warm pool: 1 to 64 of
// A-Z a-z 0-9 . _ -, so it fits a URL path segment and a metric label.
func ValidPoolName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for _, c := range []byte(name) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// SetupError is returned by Create when a setup command does not succeed.
type SetupError struct {
	Index  int      // position in Spec.Setup
	Result Result   // what the command did
	Cmd    []string // argv, or ["sh", "-c", line]
}

func (e *SetupError) Error() string {
	out := strings.TrimSpace(e.Result.Stderr.Text())
	if out == "" {
		out = strings.TrimSpace(e.Result.Stdout.Text())
	}
	if len(out) > 2000 {
		out = "..." + out[len(out)-2000:]
	}
	return fmt.Sprintf("setup[%d] %q: %s: %s", e.Index, strings.Join(e.Cmd, " "), e.Result.String(), out)
}

// Is makes a SetupError match ErrInvalidArgument: the spec cannot be built.
func (e *SetupError) Is(target error) bool { return target == ErrInvalidArgument }

// Sandbox is one live environment. Methods are safe for concurrent use;
// several commands may run at once. After Close, Exec, Start, Snapshot
// and the methods of Files return ErrClosed (so does OpenSession of a
// SessionOpener), and Close returns nil; ID, Workspace and Capabilities
// return what they did before.
type Sandbox interface {
	// ID identifies the sandbox within its runtime.
	ID() string
	// Workspace is the workspace's absolute path as commands see it.
	Workspace() string
	// Capabilities is what this sandbox enforces: the same as its
	// runtime's Capabilities. A request asking for a limit whose
	// capability is false fails with ErrUnsupported, so callers that pick
	// limits (package code) ask here instead of trying. It is fixed when
	// the sandbox is created: known without a round trip, and the same
	// after Close.
	Capabilities() Capabilities
	// Exec runs a command to completion. A non-nil error means execbox
	// could not run it (bad request, closed sandbox, program not found);
	// what the program did is in the Result. Cancelling ctx kills the
	// whole tree and returns the partial Result with ctx's error.
	Exec(ctx context.Context, req ExecRequest) (Result, error)
	// Start starts a command and returns at once. ctx bounds only the
	// start; the process runs until it exits, times out or is killed.
	Start(ctx context.Context, req ExecRequest) (Process, error)
	// Files accesses the workspace.
	Files() Files
	// Snapshot writes the workspace as a tar stream to w, bounded as
	// Files.Download is.
	Snapshot(ctx context.Context, w io.Writer) error
	// Close kills every process the sandbox started, then removes what
	// Create made. It is idempotent.
	Close() error
}

// EventKind is the kind of a process event.
type EventKind string

const (
	EventStdout EventKind = "stdout"
	EventStderr EventKind = "stderr"
	// EventExit is always the last event; it carries the Result.
	EventExit EventKind = "exit"
	// EventDropped says that output events were dropped before the next
	// event: the reader fell behind a window-mode event log (or resumed
	// from a Seq it no longer holds). Its Seq is that of the last event
	// dropped, so that resuming from Seq+1 reads on; Dropped counts the
	// bytes left out and Offset locates the next event's output. Only a
	// reader yields it, never twice the same.
	EventDropped EventKind = "dropped"
)

// Event is one step of a started process. Seq starts at 1 and increases by
// one per event, across both streams, in the order execbox read them.
type Event struct {
	Seq    uint64
	Time   time.Time
	Kind   EventKind
	Data   []byte
	Result *Result
	// Dropped is, in a dropped event, the bytes of output (both
	// streams) left out, or -1 when the reader started at a Seq older
	// than what the process keeps and the count is unknown: compare
	// Offset with what was received. In the exit event, it is every
	// byte this reader was not given: 0 means the events carried all
	// the output.
	Dropped int64
	// Offset is, in a dropped event, the bytes of output (both streams)
	// that came before the next event.
	Offset int64
}

// Process is a started command.
type Process interface {
	// ID identifies the process within its sandbox.
	ID() string
	// Events yields events with Seq >= from, waiting for new ones, and ends
	// after the exit event. If from is older than the retained window (or
	// the reader falls behind it), it yields an EventDropped saying how
	// much output it missed, then goes on from the oldest retained event;
	// with ExecRequest.FlowControl nothing is missed. Breaking out of the
	// loop is always safe. Errors (ctx done, connection lost) are yielded
	// once, last.
	Events(ctx context.Context, from uint64) iter.Seq2[Event, error]
	// WriteStdin writes to the command's standard input.
	WriteStdin(ctx context.Context, p []byte) (int, error)
	// CloseStdin closes the command's standard input (EOF).
	CloseStdin(ctx context.Context) error
	// Signal sends sig to the command's main process.
	Signal(ctx context.Context, sig Signal) error
	// Kill ends the whole process tree: SIGTERM, the grace period, SIGKILL.
	// It returns once the tree is gone. Killing an ended process is a no-op.
	Kill(ctx context.Context) error
	// Poll returns the Result if the process has ended, or nil.
	Poll(ctx context.Context) (*Result, error)
	// Wait waits for the process to end and returns its Result.
	// Cancelling ctx stops waiting, not the process.
	Wait(ctx context.Context) (Result, error)
}
