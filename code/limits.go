package code

import (
	"errors"
	"fmt"
	"time"

	"github.com/execbox/execbox"
)

// Timeouts used when neither the Request nor Options.Defaults set one.
const (
	DefaultTimeout        = 60 * time.Second
	DefaultCompileTimeout = 120 * time.Second
)

// Defaults are one language's timeouts and limits, used for the fields a
// Request leaves zero. In Limits and CompileLimits a zero field means "the
// built-in default" and a negative one "no limit".
//
// Memory is resident memory. Where the sandbox has no memory cgroup (the
// local runtime), a default memory limit becomes an address-space limit
// (RLIMIT_AS) of Memory plus headroom for what the toolchain reserves
// without using; for dotnet, whose runtime reserves 256 GiB, it is
// dropped, since no address-space limit can work there. A default
// the sandbox cannot enforce at all (PIDs without a pids cgroup) is
// dropped too. Result.Limits says what was applied.
//
// An address-space limit counts what a program reserves, not what it
// uses: every thread reserves its stack (8 MiB), and some libraries a
// buffer per core (OpenBLAS). A program starting many threads on a large
// machine may need a larger Memory, or an explicit AddressSpace.
type Defaults struct {
	// Timeout bounds the program's wall-clock time.
	Timeout time.Duration
	// Limits bound the program's resources.
	Limits execbox.Limits
	// CompileTimeout bounds the compile step's wall-clock time.
	CompileTimeout time.Duration
	// CompileLimits bound the compile step's resources.
	CompileLimits execbox.Limits
}

// DefaultsFor returns the built-in defaults of l: 60s wall clock and 10s
// CPU for the program, 120s and 60s for a compile step; 512 MiB of memory
// for python, bash, sh, go, c and cpp programs and 1 GiB for the JIT
// runtimes (javascript, typescript, csharp); 1 GiB (2 GiB for go and
// csharp) for compilers; files of at most 1 GiB; 512 processes and threads
// for a program and 4096 for a compiler (go build runs a compiler per core)
// where the sandbox can count them.
func DefaultsFor(l Language) Defaults {
	d := Defaults{
		Timeout: DefaultTimeout,
		Limits: execbox.Limits{
			CPUTime:  10 * time.Second,
			Memory:   512 * mib,
			FileSize: 1 * gib,
			PIDs:     512,
		},
		CompileTimeout: DefaultCompileTimeout,
		CompileLimits: execbox.Limits{
			CPUTime:  60 * time.Second,
			Memory:   1 * gib,
			FileSize: 1 * gib,
			PIDs:     4096,
		},
	}
	switch l {
	case JavaScript, TypeScript, CSharp:
		d.Limits.Memory = 1 * gib
	}
	switch l {
	case Go, CSharp:
		d.CompileLimits.Memory = 2 * gib
	}
	return d
}

// merge returns d with zero fields taken from def.
func (d Defaults) merge(def Defaults) Defaults {
	if d.Timeout == 0 {
		d.Timeout = def.Timeout
	}
	if d.CompileTimeout == 0 {
		d.CompileTimeout = def.CompileTimeout
	}
	d.Limits = d.Limits.Merge(def.Limits)
	d.CompileLimits = d.CompileLimits.Merge(def.CompileLimits)
	return d
}

func (d Defaults) validate(prefix string) []error {
	var errs []error
	if d.Timeout < 0 {
		errs = append(errs, execbox.Invalid(prefix+"timeout", "must not be negative"))
	}
	if d.CompileTimeout < 0 {
		errs = append(errs, execbox.Invalid(prefix+"compile_timeout", "must not be negative"))
	}
	errs = append(errs, validateLimits(prefix+"limits.", d.Limits)...)
	errs = append(errs, validateLimits(prefix+"compile_limits.", d.CompileLimits)...)
	return errs
}

// validateLimits checks what a negative ("no limit") value leaves: a CPU
// time of at least a second.
func validateLimits(prefix string, l execbox.Limits) []error {
	if l.CPUTime > 0 && l.CPUTime < time.Second {
		return []error{execbox.Invalid(prefix+"cpu_time", "must be at least 1s (the kernel counts whole seconds), or negative for none")}
	}
	return nil
}

// noNegative turns negative ("no limit") fields into zero.
func noNegative(l execbox.Limits) execbox.Limits {
	z := func(v *int64) {
		if *v < 0 {
			*v = 0
		}
	}
	if l.CPUTime < 0 {
		l.CPUTime = 0
	}
	z(&l.FileSize)
	z(&l.OpenFiles)
	z(&l.AddressSpace)
	z(&l.Memory)
	z(&l.PIDs)
	if l.CPUs < 0 {
		l.CPUs = 0
	}
	return l
}

// effectiveLimits merges explicit over def and fits the result to what
// the sandbox enforces (see Defaults). A limit the caller set explicitly
// that cannot be enforced is an ErrUnsupported *FieldError under prefix.
func effectiveLimits(explicit, def execbox.Limits, c execbox.Capabilities, headroom int64, tc string, prefix string) (execbox.Limits, error) {
	l := noNegative(explicit.Merge(def))
	var errs []error
	unsupported := func(field, why string) {
		errs = append(errs, &execbox.FieldError{Field: prefix + field, Problem: why, Kind: execbox.ErrUnsupported})
	}
	if l.Memory > 0 && !c.Memory {
		switch {
		case c.Rlimits && headroom != asOff:
			if l.AddressSpace == 0 {
				l.AddressSpace = l.Memory + headroom
			}
		case explicit.Memory > 0 && !c.Rlimits:
			unsupported("memory", "the sandbox can limit neither memory nor address space")
		case explicit.Memory > 0:
			unsupported("memory", fmt.Sprintf("the sandbox cannot limit memory (no memory cgroup), and an address-space limit would break %s, which reserves far more than it uses", tc))
		}
		l.Memory = 0
	}
	if !c.Rlimits {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"cpu_time", explicit.CPUTime > 0},
			{"file_size", explicit.FileSize > 0},
			{"open_files", explicit.OpenFiles > 0},
			{"address_space", explicit.AddressSpace > 0},
		} {
			if f.set {
				unsupported(f.name, "the sandbox cannot enforce rlimits")
			}
		}
		l.CPUTime, l.FileSize, l.OpenFiles, l.AddressSpace = 0, 0, 0, 0
	}
	if l.PIDs > 0 && !c.PIDs {
		if explicit.PIDs > 0 {
			unsupported("pids", "the sandbox cannot limit processes (no pids cgroup)")
		}
		l.PIDs = 0
	}
	if l.CPUs > 0 && !c.CPUs {
		if explicit.CPUs > 0 {
			unsupported("cpus", "the sandbox cannot limit CPU bandwidth (no cpu cgroup)")
		}
		l.CPUs = 0
	}
	return l, errors.Join(errs...)
}
