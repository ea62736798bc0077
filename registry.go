package execbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Factory makes a Runtime from options. It has no side effects beyond
// building the value: probing the machine belongs in Health, work in Create.
type Factory func(opts Options) (Runtime, error)

// Options are given to every runtime factory.
type Options struct {
	// Logger receives the runtime's logs; nil discards them.
	Logger *slog.Logger
	// Settings is the runtime's own configuration (the runtimes.NAME
	// section of execbox.yaml). Decode it with DecodeSettings.
	Settings map[string]any
}

// Registry maps runtime names to factories. The zero value is empty and
// ready; it is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]Factory
}

// DefaultRegistry is where runtimes register in init.
var DefaultRegistry = &Registry{}

// Register adds a runtime. It panics on an empty or duplicate name or a
// nil factory: both are programming errors found at start-up.
func (r *Registry) Register(name string, f Factory) {
	if name == "" || f == nil {
		panic("execbox: Register with empty name or nil factory")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.factories == nil {
		r.factories = make(map[string]Factory)
	}
	if _, dup := r.factories[name]; dup {
		panic("execbox: runtime " + name + " registered twice")
	}
	r.factories[name] = f
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Open builds the runtime called name. An unknown name is ErrNotFound
// listing the known names.
func (r *Registry) Open(name string, opts Options) (Runtime, error) {
	r.mu.RLock()
	f := r.factories[name]
	r.mu.RUnlock()
	if f == nil {
		return nil, &FieldError{
			Field:   "runtime",
			Problem: fmt.Sprintf("unknown runtime %q (known: %s)", name, strings.Join(r.Names(), ", ")),
			Kind:    ErrNotFound,
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	rt, err := f(opts)
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", name, err)
	}
	return rt, nil
}

// Register adds a runtime to DefaultRegistry.
func Register(name string, f Factory) { DefaultRegistry.Register(name, f) }

// Open opens a runtime from DefaultRegistry.
func Open(name string, opts Options) (Runtime, error) { return DefaultRegistry.Open(name, opts) }

// Names lists DefaultRegistry's runtimes.
func Names() []string { return DefaultRegistry.Names() }

// The runtimes OpenDefault chooses between.
const (
	// IsolatedRuntime is the default runtime where it works.
	IsolatedRuntime = "sandbox"
	// FallbackRuntime is used where IsolatedRuntime does not work, unless
	// isolation is required.
	FallbackRuntime = "local"
)

// DefaultOptions configure OpenDefault.
type DefaultOptions struct {
	// Options returns the options of the named runtime; nil means zero
	// Options.
	Options func(name string) Options
	// RequireIsolation makes OpenDefault fail with ErrUnavailable rather
	// than fall back to running commands on the host.
	RequireIsolation bool
	// OnFallback, if set, is called with the isolated runtime's health
	// detail when OpenDefault falls back.
	OnFallback func(detail string)
}

// OpenDefault opens the default runtime: IsolatedRuntime where its Health
// says it is available on this machine and a live Probe (create, exec
// `true`, close; run once per process and settings) succeeded, else
// FallbackRuntime (or an ErrUnavailable error naming what is missing,
// with RequireIsolation). This is what the CLI's "runtime: auto" does.
//
// It falls back only for what the machine lacks, never for a
// configuration error: settings IsolatedRuntime's factory refuses, a
// probe failing with ErrInvalidArgument, and any failure of an
// IsolatedRuntime given settings (a mistyped path looks like a missing
// feature to its health) are returned as errors (and an IsolatedRuntime
// not registered at all, ErrNotFound, falls back).
func (r *Registry) OpenDefault(ctx context.Context, opts DefaultOptions) (Runtime, error) {
	optsFor := func(name string) Options {
		if opts.Options == nil {
			return Options{}
		}
		return opts.Options(name)
	}
	iso := optsFor(IsolatedRuntime)
	rt, err := r.Open(IsolatedRuntime, iso)
	if err != nil && !errors.Is(err, ErrNotFound) {
		// The factory checks settings only (see Factory): its error is
		// the configuration's, which must never lower isolation.
		return nil, err
	}
	var detail string
	if err == nil {
		if h := rt.Health(ctx); !h.Available {
			detail = h.Detail
		} else if err := r.probeOnce(ctx, IsolatedRuntime, iso, rt); err != nil {
			if errors.Is(err, ErrInvalidArgument) {
				// The settings (a workspace size, a directory) are
				// wrong, not the machine.
				return nil, fmt.Errorf("the %s runtime's settings are invalid; not falling back to %s: %w", IsolatedRuntime, FallbackRuntime, err)
			}
			if exhausted(err) {
				// The isolated runtime works here but something ran
				// out, perhaps because a sandbox's command used it up
				// (filled the file system of a given workspace and
				// TMPDIR, the host's pids): falling back would run the
				// next commands on the host, unisolated.
				return nil, fmt.Errorf("the %s runtime is available here but ran out of a resource; not falling back to %s, which would run commands on the host (choose it explicitly for that): %w: %w", IsolatedRuntime, FallbackRuntime, err, ErrUnavailable)
			}
			detail = err.Error()
		} else {
			return rt, nil
		}
	} else {
		detail = err.Error()
	}
	if opts.RequireIsolation {
		return nil, fmt.Errorf("isolation is required and the %s runtime is unavailable: %s: %w", IsolatedRuntime, detail, ErrUnavailable)
	}
	if len(iso.Settings) > 0 {
		// Settings were given for the isolated runtime (a root file
		// system, directories, a network, images): whatever made it
		// fail, the user meant it to run, and a wrong path reads as a
		// missing feature to its health and probe.
		return nil, fmt.Errorf("the %s runtime is configured (%s) but cannot run here: %s; not falling back to %s, which would run commands on the host (choose it explicitly for that): %w", IsolatedRuntime, settingNames(iso.Settings), detail, FallbackRuntime, ErrUnavailable)
	}
	if opts.OnFallback != nil {
		opts.OnFallback(detail)
	}
	return r.Open(FallbackRuntime, optsFor(FallbackRuntime))
}

// exhausted reports whether err says a resource ran out (disk, inodes,
// memory, processes, time) rather than that the runtime cannot work on
// this machine.
func exhausted(err error) bool {
	for _, target := range []error{
		ErrResourceExhausted, context.DeadlineExceeded,
		syscall.ENOSPC, syscall.EDQUOT, syscall.ENOMEM, syscall.EAGAIN, syscall.EMFILE, syscall.ENFILE,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// OpenDefault opens the default runtime of DefaultRegistry.
func OpenDefault(ctx context.Context, opts DefaultOptions) (Runtime, error) {
	return DefaultRegistry.OpenDefault(ctx, opts)
}

// settingNames lists the keys of settings, sorted, for an error message.
func settingNames(settings map[string]any) string {
	names := slices.Sorted(maps.Keys(settings))
	return strings.Join(names, ", ")
}
