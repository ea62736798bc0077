package execbox

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Defaults applied when a field is left at its zero value.
const (
	DefaultTimeout     = 120 * time.Second
	DefaultGracePeriod = 2 * time.Second
	DefaultOutputLimit = 16 << 20 // bytes per stream
	DefaultEventWindow = 4 << 20  // bytes of events retained for re-reading
)

// EnvPolicy says which variables of the runtime's own environment reach a
// command. Explicit variables (Env fields) are always added on top.
type EnvPolicy string

const (
	// EnvClean passes only PATH and LANG, and sets HOME to the workspace.
	// It is the default so that host secrets never leak by accident.
	EnvClean EnvPolicy = "clean"
	// EnvInherit passes the whole environment of the runtime. Opt-in.
	EnvInherit EnvPolicy = "inherit"
	// EnvAllow passes the clean set plus the variables named in EnvAllow.
	EnvAllow EnvPolicy = "allow"
)

func (p EnvPolicy) valid() bool {
	switch p {
	case "", EnvClean, EnvInherit, EnvAllow:
		return true
	}
	return false
}

// User is a numeric identity to run a command as. Only a runtime running as
// root can switch users.
type User struct {
	UID    uint32
	GID    uint32
	Groups []uint32
}

// Limits bound the resources of a command. Zero means "no limit" (or the
// runtime's default). A runtime that cannot enforce a non-zero limit rejects
// the request with ErrUnsupported naming the field; it never ignores it.
type Limits struct {
	// CPUTime caps CPU seconds (RLIMIT_CPU); the command is killed with
	// SIGXCPU and the result's Reason is ReasonCPULimit.
	CPUTime time.Duration
	// FileSize caps the size of any file the command writes (RLIMIT_FSIZE).
	FileSize int64
	// OpenFiles caps open file descriptors (RLIMIT_NOFILE).
	OpenFiles int64
	// AddressSpace caps virtual memory (RLIMIT_AS). Off by default: JIT
	// runtimes (node, the JVM, dotnet) reserve far more than they use.
	AddressSpace int64
	// Memory caps resident memory through a cgroup; exceeding it is
	// reported as ReasonOOMKilled.
	Memory int64
	// PIDs caps the number of processes and threads (cgroup pids).
	PIDs int64
	// CPUs caps CPU bandwidth in cores, e.g. 0.5 or 2 (cgroup cpu quota).
	CPUs float64
}

// Merge returns l with every zero field taken from def.
func (l Limits) Merge(def Limits) Limits {
	if l.CPUTime == 0 {
		l.CPUTime = def.CPUTime
	}
	if l.FileSize == 0 {
		l.FileSize = def.FileSize
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = def.OpenFiles
	}
	if l.AddressSpace == 0 {
		l.AddressSpace = def.AddressSpace
	}
	if l.Memory == 0 {
		l.Memory = def.Memory
	}
	if l.PIDs == 0 {
		l.PIDs = def.PIDs
	}
	if l.CPUs == 0 {
		l.CPUs = def.CPUs
	}
	return l
}

func (l Limits) validate(prefix string) []error {
	var errs []error
	neg := func(name string, v float64) {
		if v < 0 {
			errs = append(errs, Invalid(prefix+name, "must not be negative"))
		}
	}
	neg("cpu_time", float64(l.CPUTime))
	neg("file_size", float64(l.FileSize))
	neg("open_files", float64(l.OpenFiles))
	neg("address_space", float64(l.AddressSpace))
	neg("memory", float64(l.Memory))
	neg("pids", float64(l.PIDs))
	neg("cpus", l.CPUs)
	if l.CPUTime > 0 && l.CPUTime < time.Second {
		errs = append(errs, Invalid(prefix+"cpu_time", "must be at least 1s (the kernel counts whole seconds)"))
	}
	return errs
}

// ExecRequest describes one command. Its zero value is not runnable: set
// exactly one of Command or Shell. Every other zero field means the default.
type ExecRequest struct {
	// Command is the argv form: Command[0] is the program, found in the
	// command's PATH; no shell is involved, so nothing is interpolated.
	Command []string
	// Shell is the shell form: a command line run by bash -c where the
	// sandbox has /bin/bash (agents write for bash: [[, source,
	// pipefail), else by /bin/sh -c. Result.Shell says which.
	Shell string

	// Stdin, if set, is copied to the command's standard input, which is
	// closed at EOF. Nil means empty input (for Start: write with
	// Process.WriteStdin). execbox never closes it.
	Stdin io.Reader

	// Dir is the working directory: relative to the workspace, or absolute
	// inside it. Empty means the workspace. A path leaving the workspace is
	// refused with ErrPermission.
	Dir string

	// Env adds variables over those the environment policy passes.
	Env map[string]string
	// EnvPolicy overrides the sandbox's policy; empty keeps it.
	EnvPolicy EnvPolicy
	// EnvAllow names the variables passed under EnvAllow.
	EnvAllow []string

	// Timeout bounds the wall-clock time. Zero means DefaultTimeout;
	// negative is invalid. On timeout the whole process tree gets SIGTERM,
	// then SIGKILL after GracePeriod, and the Result says ReasonTimedOut.
	Timeout time.Duration
	// GracePeriod between SIGTERM and SIGKILL. Zero means DefaultGracePeriod.
	GracePeriod time.Duration

	// OutputLimit caps the bytes kept per stream. Zero means
	// DefaultOutputLimit. Output beyond it is read and counted but not kept:
	// the first and last halves are kept, the middle is dropped.
	OutputLimit int64
	// KillOnOutputLimit kills the command when a stream passes OutputLimit
	// (ReasonOutputLimit) instead of draining the rest.
	KillOnOutputLimit bool

	// Limits override the sandbox's limits field by field.
	Limits Limits
	// User overrides the sandbox's user.
	User *User

	// EventWindow is the number of bytes of events a started Process keeps
	// for re-reading. Zero means DefaultEventWindow. Exec ignores it.
	EventWindow int64
	// FlowControl makes a started Process's events lose nothing: once
	// EventWindow bytes of output wait for an events reader to be given
	// them, the command's writes block until one reads on, as a pipe's
	// writer blocks when its reader is slow. Without it the oldest
	// events are dropped to make room, and a reader that fell behind
	// gets an EventDropped saying how much it missed. A process started
	// with FlowControl that nobody reads stops once the window is full,
	// until its timeout. Exec ignores it.
	FlowControl bool
}

// Validate reports every problem of r at once, as *FieldError values joined
// with errors.Join. It checks what can be checked without a sandbox.
func (r *ExecRequest) Validate() error {
	var errs []error
	switch {
	case len(r.Command) == 0 && r.Shell == "":
		errs = append(errs, Invalid("command", "is required (or shell)"))
	case len(r.Command) > 0 && r.Shell != "":
		errs = append(errs, Invalid("shell", "cannot be set together with command"))
	case len(r.Command) > 0 && r.Command[0] == "":
		errs = append(errs, Invalid("command[0]", "must not be empty"))
	}
	for i, a := range r.Command {
		if len(errs) > MaxProblems {
			break
		}
		if strings.IndexByte(a, 0) >= 0 {
			errs = append(errs, Invalid(fmt.Sprintf("command[%d]", i), "contains a NUL byte"))
		}
	}
	if strings.IndexByte(r.Shell, 0) >= 0 {
		errs = append(errs, Invalid("shell", "contains a NUL byte"))
	}
	if strings.IndexByte(r.Dir, 0) >= 0 {
		errs = append(errs, Invalid("dir", "contains a NUL byte"))
	}
	errs = append(errs, validateEnv("env", r.Env, r.EnvPolicy, r.EnvAllow)...)
	if r.Timeout < 0 {
		errs = append(errs, Invalid("timeout", "must not be negative"))
	}
	if r.GracePeriod < 0 {
		errs = append(errs, Invalid("grace_period", "must not be negative"))
	}
	if r.OutputLimit < 0 {
		errs = append(errs, Invalid("output_limit", "must not be negative"))
	}
	if r.EventWindow < 0 {
		errs = append(errs, Invalid("event_window", "must not be negative"))
	}
	errs = append(errs, r.Limits.validate("limits.")...)
	return joinProblems(errs)
}

func validateEnv(field string, env map[string]string, policy EnvPolicy, allow []string) []error {
	var errs []error
	for k, v := range env {
		switch {
		case k == "":
			errs = append(errs, Invalid(field, "has an empty variable name"))
		case strings.ContainsAny(k, "=\x00"):
			errs = append(errs, Invalid(field+"."+strings.ReplaceAll(k, "\x00", `\0`), "name contains '=' or a NUL byte"))
		case strings.IndexByte(v, 0) >= 0:
			errs = append(errs, Invalid(field+"."+k, "value contains a NUL byte"))
		}
	}
	if !policy.valid() {
		errs = append(errs, Invalid(field+"_policy", "unknown policy %q (want clean, inherit or allow)", policy))
	}
	for i, k := range allow {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			errs = append(errs, Invalid(fmt.Sprintf("%s_allow[%d]", field, i), "is not a variable name"))
		}
	}
	return errs
}
