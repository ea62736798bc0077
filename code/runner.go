package code

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox"
)

// probeTimeout bounds one probe command.
const probeTimeout = 30 * time.Second

// Options configure a Runner. The zero value is ready to use.
type Options struct {
	// Defaults override the built-in defaults of a language (DefaultsFor)
	// field by field: a zero field keeps the built-in value, a negative
	// limit removes it. Defaults the sandbox cannot enforce are adapted or
	// dropped (see Defaults), never an error.
	Defaults map[Language]Defaults
	// Toolchains restricts and orders the toolchains tried for a
	// language, by name (as Status.Toolchains lists them: "bun", "node",
	// "node+esbuild", "dotnet", "mono", ...). A language not in the map
	// tries all of its toolchains in the built-in order.
	Toolchains map[Language][]string
	// CacheDir is where toolchains keep caches shared by runs (Go's build
	// cache and module path, .NET's home and packages), as commands see
	// it; relative to the workspace unless absolute. Empty means
	// DefaultCacheDir.
	CacheDir string
}

// Validate reports every problem of o at once (an unknown language or
// toolchain, a bad default), as *execbox.FieldError values joined with
// errors.Join; a Runner's Run returns the same.
func (o *Options) Validate() error {
	var errs []error
	for l, d := range o.Defaults {
		if _, ok := toolchains[l]; !ok {
			errs = append(errs, execbox.Invalid("defaults", "unknown language %q (known: %s)", l, knownLanguages()))
			continue
		}
		errs = append(errs, d.validate("defaults."+string(l)+".")...)
	}
	for l, names := range o.Toolchains {
		tcs, ok := toolchains[l]
		if !ok {
			errs = append(errs, execbox.Invalid("toolchains", "unknown language %q (known: %s)", l, knownLanguages()))
			continue
		}
		for i, n := range names {
			if !slices.ContainsFunc(tcs, func(tc *toolchain) bool { return tc.name == n }) {
				errs = append(errs, execbox.Invalid(fmt.Sprintf("toolchains.%s[%d]", l, i), "unknown toolchain %q (known: %s)", n, toolchainNames(l)))
			}
		}
	}
	if strings.IndexByte(o.CacheDir, 0) >= 0 {
		errs = append(errs, execbox.Invalid("cache_dir", "contains a NUL byte"))
	}
	return errors.Join(errs...)
}

func toolchainNames(l Language) string {
	var names []string
	for _, tc := range toolchains[l] {
		names = append(names, tc.name)
	}
	return strings.Join(names, ", ")
}

// Runner runs code in one sandbox. It resolves each language's toolchain
// on first use, by running probes in the sandbox, and remembers it (only
// successes: a language found missing is probed again next time). It is
// safe for concurrent use; concurrent first uses of a language share one
// probe. A Runner holds no resources: drop it with its sandbox.
type Runner struct {
	sb      execbox.Sandbox
	opts    Options
	optsErr error

	mu    sync.Mutex
	langs map[Language]*slot[*resolved]
}

// slot holds a value computed once: nil until a computation starts.
type slot[T any] struct{ p *pending[T] }

// pending is a value being computed once for concurrent callers.
type pending[T any] struct {
	done chan struct{}
	val  T
	err  error
}

// NewRunner returns a Runner for sb. Invalid options make every Run fail
// with ErrInvalidArgument naming the field.
func NewRunner(sb execbox.Sandbox, opts Options) *Runner {
	r := &Runner{sb: sb, opts: opts, langs: make(map[Language]*slot[*resolved])}
	r.optsErr = opts.Validate()
	return r
}

func (r *Runner) defaults(l Language) Defaults {
	return r.opts.Defaults[l].merge(DefaultsFor(l))
}

func (r *Runner) cacheDir() string {
	d := r.opts.CacheDir
	if d == "" {
		d = DefaultCacheDir
	}
	if !path.IsAbs(d) {
		d = path.Join(r.sb.Workspace(), d)
	}
	return d
}

// once returns the value of s, computing it with f if no computation has
// succeeded or is under way; mu guards s. A failed computation is
// forgotten; its waiters retry with their own context unless the failure
// is final.
func once[T any](ctx context.Context, mu *sync.Mutex, s *slot[T], f func() (T, error), final func(error) bool) (T, error) {
	for {
		mu.Lock()
		p := s.p
		if p == nil {
			p = &pending[T]{done: make(chan struct{})}
			s.p = p
			mu.Unlock()
			p.val, p.err = f()
			if p.err != nil {
				mu.Lock()
				if s.p == p {
					s.p = nil
				}
				mu.Unlock()
			}
			close(p.done)
			return p.val, p.err
		}
		mu.Unlock()
		select {
		case <-p.done:
			if p.err == nil || final(p.err) {
				return p.val, p.err
			}
			if err := ctx.Err(); err != nil {
				var zero T
				return zero, err
			}
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
}

// resolve returns the toolchain of lang, probing for it once.
func (r *Runner) resolve(ctx context.Context, lang Language) (*resolved, error) {
	r.mu.Lock()
	s := r.langs[lang]
	if s == nil {
		s = &slot[*resolved]{}
		r.langs[lang] = s
	}
	r.mu.Unlock()
	return once(ctx, &r.mu, s, func() (*resolved, error) {
		return r.find(ctx, lang)
	}, isMissing)
}

// forget drops what is known of lang.
func (r *Runner) forget(lang Language) {
	r.mu.Lock()
	if s := r.langs[lang]; s != nil {
		s.p = nil
	}
	r.mu.Unlock()
}

func isMissing(err error) bool {
	var me *MissingError
	return errors.As(err, &me)
}

// find probes lang's toolchains in order and returns the first present.
func (r *Runner) find(ctx context.Context, lang Language) (*resolved, error) {
	var tried []ToolchainStatus
	for _, tc := range r.candidates(lang) {
		rs, why, err := r.probe(ctx, tc)
		if err != nil {
			return nil, err
		}
		if rs != nil {
			return rs, nil
		}
		tried = append(tried, ToolchainStatus{Name: tc.name, Detail: why})
	}
	return nil, &MissingError{Language: lang, Tried: tried, Hint: installHint[lang]}
}

func (r *Runner) candidates(lang Language) []*toolchain {
	names, ok := r.opts.Toolchains[lang]
	if !ok {
		return toolchains[lang]
	}
	var out []*toolchain
	for _, n := range names {
		for _, tc := range toolchains[lang] {
			if tc.name == n {
				out = append(out, tc)
			}
		}
	}
	return out
}

// probe runs tc's probe script. It returns the resolved toolchain, or why
// it is not usable, or an error when the sandbox could not run the probe.
func (r *Runner) probe(ctx context.Context, tc *toolchain) (*resolved, string, error) {
	res, err := r.sb.Exec(ctx, execbox.ExecRequest{
		Shell:     tc.script,
		EnvPolicy: execbox.EnvClean,
		Env: map[string]string{
			"GOTOOLCHAIN":                       "local",
			"DOTNET_CLI_HOME":                   path.Join(r.cacheDir(), "dotnet"),
			"DOTNET_NOLOGO":                     "1",
			"DOTNET_CLI_TELEMETRY_OPTOUT":       "1",
			"DOTNET_SKIP_FIRST_TIME_EXPERIENCE": "1",
		},
		Timeout:     probeTimeout,
		OutputLimit: 64 << 10,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, "", fmt.Errorf("%s: probe %s: %w", tc.lang, tc.name, err)
	}
	if !res.Success() {
		why := lastLine(res.Stderr.Text())
		if why == "" {
			why = "probe " + res.String()
		}
		return nil, why, nil
	}
	var lines []string
	for l := range strings.Lines(res.Stdout.Text()) {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2+tc.nExtra {
		return nil, fmt.Sprintf("probe printed %q, not a path and a version", res.Stdout.Text()), nil
	}
	rs := &resolved{tc: tc, path: lines[0], version: lines[1], extra: lines[2 : 2+tc.nExtra]}
	if tc.check != nil {
		if err := tc.check(rs); err != nil {
			return nil, err.Error(), nil
		}
	}
	for _, p := range append([]string{rs.path}, rs.extra...) {
		if !path.IsAbs(p) {
			return nil, fmt.Sprintf("probe printed %q, not an absolute path", p), nil
		}
	}
	return rs, "", nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	return s
}

// Status is a language's state in a sandbox, as Probe reports it.
type Status struct {
	Language Language
	// Available reports whether Run can run the language.
	Available bool
	// Toolchain is the toolchain Run uses, Path its resolved interpreter
	// or compiler (not a shim) and Version its version.
	Toolchain string
	Path      string
	Version   string
	// Detail says, when the language is not available, why and what to
	// install.
	Detail string
	// Toolchains lists every toolchain tried, in order of preference.
	Toolchains []ToolchainStatus
}

// ToolchainStatus is one toolchain's state in a sandbox.
type ToolchainStatus struct {
	// Name is the toolchain's name, as Options.Toolchains takes it.
	Name string
	// Available reports whether the sandbox has it; Path is then its
	// resolved interpreter or compiler and Version its version.
	Available bool
	Path      string
	Version   string
	// Detail says why the toolchain is not usable.
	Detail string
}

// Probe reports every language in sb, probing each toolchain (see
// Runner.Probe).
func Probe(ctx context.Context, sb execbox.Sandbox) ([]Status, error) {
	return shared.get(sb).Probe(ctx)
}

// Probe probes every toolchain of every language, a few at a time, and
// reports each language, sorted by name. What it finds is remembered for
// Run. The error is non-nil only when the sandbox could not run the
// probes (closed, ctx ended).
func (r *Runner) Probe(ctx context.Context) ([]Status, error) {
	if r.optsErr != nil {
		return nil, r.optsErr
	}
	type job struct {
		li, ti int
		tc     *toolchain
	}
	out := make([]Status, len(languages))
	found := make([][]*resolved, len(languages))
	var jobs []job
	for li, l := range languages {
		cands := r.candidates(l)
		out[li] = Status{Language: l, Toolchains: make([]ToolchainStatus, len(cands))}
		found[li] = make([]*resolved, len(cands))
		for ti, tc := range cands {
			jobs = append(jobs, job{li, ti, tc})
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			rs, why, err := r.probe(ctx, j.tc)
			ts := ToolchainStatus{Name: j.tc.name, Detail: why}
			switch {
			case err != nil:
				cancel(err)
				return
			case rs != nil:
				ts = ToolchainStatus{Name: j.tc.name, Available: true, Path: rs.path, Version: rs.version}
				found[j.li][j.ti] = rs
			}
			out[j.li].Toolchains[j.ti] = ts
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	for li, l := range languages {
		st := &out[li]
		for _, rs := range found[li] {
			if rs != nil {
				st.Available, st.Toolchain, st.Path, st.Version = true, rs.tc.name, rs.path, rs.version
				r.remember(l, rs)
				break
			}
		}
		if !st.Available {
			st.Detail = (&MissingError{Language: l, Tried: st.Toolchains, Hint: installHint[l]}).Error()
		}
	}
	return out, nil
}

// remember records rs for lang unless something is already known.
func (r *Runner) remember(lang Language, rs *resolved) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.langs[lang]
	if s == nil {
		s = &slot[*resolved]{}
		r.langs[lang] = s
	}
	if s.p == nil {
		s.p = &pending[*resolved]{done: make(chan struct{}), val: rs}
		close(s.p.done)
	}
}

// MissingError says that no toolchain of a language works in the sandbox,
// why, and what to install. It matches execbox.ErrNotFound.
type MissingError struct {
	// Language is the language asked for.
	Language Language
	// Tried lists each toolchain tried and why it is not usable.
	Tried []ToolchainStatus
	// Hint says what to install.
	Hint string
}

// Error reads "language python: not available in this sandbox (python3:
// python3 not found in PATH); install Python 3 (...)".
func (e *MissingError) Error() string {
	var why []string
	for _, t := range e.Tried {
		why = append(why, t.Name+": "+t.Detail)
	}
	msg := fmt.Sprintf("language %s: not available in this sandbox", e.Language)
	if len(why) > 0 {
		msg += " (" + strings.Join(why, "; ") + ")"
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// Is makes a MissingError match execbox.ErrNotFound.
func (e *MissingError) Is(target error) bool { return target == execbox.ErrNotFound }

// runnerCache keeps the Runners of package-level Run and Probe, for the
// sandboxes used last.
type runnerCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of execbox.Sandbox, most recent first
	byKey map[execbox.Sandbox]*list.Element
	vals  map[execbox.Sandbox]*Runner
}

var shared = &runnerCache{max: 64}

func (c *runnerCache) get(sb execbox.Sandbox) *Runner {
	if sb == nil || !reflect.TypeOf(sb).Comparable() {
		return NewRunner(sb, Options{})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.order == nil {
		c.order = list.New()
		c.byKey = make(map[execbox.Sandbox]*list.Element)
		c.vals = make(map[execbox.Sandbox]*Runner)
	}
	if e, ok := c.byKey[sb]; ok {
		c.order.MoveToFront(e)
		return c.vals[sb]
	}
	r := NewRunner(sb, Options{})
	c.byKey[sb] = c.order.PushFront(sb)
	c.vals[sb] = r
	for c.order.Len() > c.max {
		old := c.order.Remove(c.order.Back()).(execbox.Sandbox)
		delete(c.byKey, old)
		delete(c.vals, old)
	}
	return r
}

func (c *runnerCache) drop(sb execbox.Sandbox) {
	if sb == nil || !reflect.TypeOf(sb).Comparable() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[sb]; ok {
		c.order.Remove(e)
		delete(c.byKey, sb)
		delete(c.vals, sb)
	}
}
