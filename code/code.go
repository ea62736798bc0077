package code

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"strings"
	"time"

	"github.com/execbox/execbox"
)

// RunsDir is the directory of the workspace that holds one directory per
// run, named by a sortable ID (20060102-150405-1a2b3c4d).
const RunsDir = ".execbox/runs"

// DefaultCacheDir is where toolchains keep caches shared by the runs of a
// sandbox (Go's build cache and module path, .NET's home and packages),
// relative to the workspace.
const DefaultCacheDir = ".execbox/cache"

// Request is one program to run. Language and Source are required; every
// other zero field means the default.
type Request struct {
	// Language is the source's language: a Language value or an alias
	// ParseLanguage accepts ("py", "js", "ts", "c++", ...).
	Language Language
	// Source is the program. It is written to the run directory as
	// main.py, main.js, main.ts, main.cs, main.sh, main.go, main.c or
	// main.cpp.
	Source string
	// Files are written to the run directory before the source is
	// compiled or run: modules the source imports, input data. Compiled
	// languages compile the ones in their language along with the source
	// (.c; .cpp, .cc, .cxx; .go; .cs; .ts modules the source imports).
	Files []File
	// Stdin, if set, is the program's standard input; nil means empty.
	// Run reads it only in the run phase and never closes it.
	Stdin io.Reader
	// Stdout and Stderr, if set, receive every byte the program writes
	// to its standard output and error while it runs (the run phase, not
	// the compile step), in order, however much: a slow writer slows the
	// program, as a pipe would. The Result still keeps OutputLimit of
	// each. A writer's error kills the program and is Run's error. Run
	// never touches them after it returns. (A Delegate cannot stream:
	// such a run goes step by step.)
	Stdout, Stderr io.Writer
	// Args are the program's arguments.
	Args []string
	// Env adds variables to the program's environment, and the compile
	// step's. Without them the environment is PATH and LANG from the
	// runtime, HOME set to the run directory, and what the toolchain needs
	// (GOCACHE, ...); the sandbox's env policy does not apply, so nothing
	// else from the host reaches the program.
	Env map[string]string
	// Limits bound the program's resources, field by field over the
	// language's defaults (see Defaults); a negative field removes that
	// default. A limit set here that the sandbox cannot enforce is an
	// ErrUnsupported *FieldError naming it. Memory is turned into an
	// address-space limit where there is no memory cgroup (see Defaults).
	Limits execbox.Limits
	// Timeout bounds the program's wall-clock time. Zero means the
	// language's default (DefaultTimeout); negative is invalid.
	Timeout time.Duration
	// CompileTimeout bounds the compile step of compiled languages. Zero
	// means the language's default (DefaultCompileTimeout); negative is
	// invalid.
	CompileTimeout time.Duration
	// CompileFlags are added to the compiler's command line, e.g.
	// "-std=c++20" or "-tags=x". Interpreted languages ignore them.
	CompileFlags []string
	// OutputLimit caps the bytes kept per stream of each phase. Zero means
	// execbox.DefaultOutputLimit.
	OutputLimit int64
	// Cleanup removes the run directory when the run ends, so the files
	// the program wrote are lost. By default the directory is kept (see
	// Result.Dir and Remove).
	Cleanup bool
}

// File is a file written to the run directory.
type File struct {
	// Path is relative to the run directory, with forward slashes; it
	// may not leave it.
	Path string
	// Content is the file's content.
	Content []byte
	// Mode is the file's permission; zero means 0644.
	Mode fs.FileMode
}

// Result is what a run did. The embedded execbox.Result is the phase that
// ended it: the compile step if that did not succeed, else the program.
// Like Exec's result it is data: a compile error, a crash, a timeout or a
// limit is reported here with a nil error.
type Result struct {
	execbox.Result
	// Phase names the phase of the embedded Result.
	Phase Phase
	// Compile is the compile step's result, or nil for a language without
	// one. When Phase is PhaseCompile it equals the embedded Result.
	Compile *execbox.Result
	// Language is the canonical language.
	Language Language
	// Toolchain names what ran the source ("python3", "node+esbuild",
	// "mono", ...) and Version its version.
	Toolchain string
	Version   string
	// Command is the argv of the phase (paths are as commands see them).
	Command []string
	// Limits are the limits sent with the phase's command, after defaults
	// and translation to what the sandbox enforces (the sandbox's own
	// limits fill the fields left zero).
	Limits execbox.Limits
	// Dir is the run directory relative to the workspace (under RunsDir),
	// holding the source, the request's files, build output and whatever
	// the program wrote: list and fetch them with Sandbox.Files. It stays
	// until Remove, or the sandbox's end for a temporary workspace. Empty
	// after Request.Cleanup.
	Dir string
}

// String summarises the outcome, e.g. "exited 0" or "compile: exited 1".
func (r *Result) String() string {
	if r.Phase == PhaseCompile {
		return "compile: " + r.Result.String()
	}
	return r.Result.String()
}

// Validate reports every problem of r at once, as *FieldError values
// joined with errors.Join. It checks what can be checked without a
// sandbox.
func (r *Request) Validate() error {
	_, err := r.validate()
	return err
}

func (r *Request) validate() (Language, error) {
	var errs []error
	lang, err := ParseLanguage(string(r.Language))
	if err != nil {
		errs = append(errs, err)
	}
	if r.Source == "" {
		errs = append(errs, execbox.Invalid("source", "is required"))
	}
	for i, f := range r.Files {
		field := fmt.Sprintf("files[%d].path", i)
		switch p := f.Path; {
		case p == "":
			errs = append(errs, execbox.Invalid(field, "is required"))
		case strings.IndexByte(p, 0) >= 0:
			errs = append(errs, execbox.Invalid(field, "contains a NUL byte"))
		case !fs.ValidPath(p) || p == ".":
			errs = append(errs, execbox.Invalid(field, "%q is not a clean relative path inside the run directory", p))
		case lang != "" && p == lang.mainFile():
			errs = append(errs, execbox.Invalid(field, "%q is where the source goes", p))
		}
		if f.Mode&^fs.ModePerm != 0 {
			errs = append(errs, execbox.Invalid(fmt.Sprintf("files[%d].mode", i), "%v is not a permission", f.Mode))
		}
	}
	for i, a := range r.Args {
		if strings.IndexByte(a, 0) >= 0 {
			errs = append(errs, execbox.Invalid(fmt.Sprintf("args[%d]", i), "contains a NUL byte"))
		}
	}
	for i, a := range r.CompileFlags {
		if strings.IndexByte(a, 0) >= 0 {
			errs = append(errs, execbox.Invalid(fmt.Sprintf("compile_flags[%d]", i), "contains a NUL byte"))
		}
	}
	for k, v := range r.Env {
		switch {
		case k == "":
			errs = append(errs, execbox.Invalid("env", "has an empty variable name"))
		case strings.ContainsAny(k, "=\x00"):
			errs = append(errs, execbox.Invalid("env."+strings.ReplaceAll(k, "\x00", `\0`), "name contains '=' or a NUL byte"))
		case strings.IndexByte(v, 0) >= 0:
			errs = append(errs, execbox.Invalid("env."+k, "value contains a NUL byte"))
		}
	}
	errs = append(errs, validateLimits("limits.", r.Limits)...)
	if r.Timeout < 0 {
		errs = append(errs, execbox.Invalid("timeout", "must not be negative"))
	}
	if r.CompileTimeout < 0 {
		errs = append(errs, execbox.Invalid("compile_timeout", "must not be negative"))
	}
	if r.OutputLimit < 0 {
		errs = append(errs, execbox.Invalid("output_limit", "must not be negative"))
	}
	return lang, errors.Join(errs...)
}

// Run runs req in sb with a Runner shared by the calls for the same
// sandbox, so interpreters are resolved once per sandbox (for the 64
// sandboxes used last). See Runner.Run.
func Run(ctx context.Context, sb execbox.Sandbox, req Request) (Result, error) {
	r := shared.get(sb)
	res, err := r.Run(ctx, req)
	if errors.Is(err, execbox.ErrClosed) {
		shared.drop(sb)
	}
	return res, err
}

// Run writes the source and files to a new run directory, compiles them
// if the language is compiled, runs the program and returns what
// happened.
//
// The error is non-nil only when the run could not be done: an invalid
// request (ErrInvalidArgument naming the field), a language with no
// toolchain in the sandbox (a *MissingError, matching ErrNotFound), a
// limit the sandbox cannot enforce (ErrUnsupported), a closed sandbox.
// Cancelling ctx kills the running phase's whole process tree and returns
// its partial Result with ctx's error.
func (r *Runner) Run(ctx context.Context, req Request) (Result, error) {
	lang, err := req.validate()
	if err != nil {
		return Result{}, err
	}
	if r.optsErr != nil {
		return Result{}, r.optsErr
	}
	if res, ok, err := r.delegate(ctx, req); ok {
		return res, err
	}
	rs, err := r.resolve(ctx, lang)
	if err != nil {
		return Result{}, err
	}
	c := r.sb.Capabilities()
	def := r.defaults(lang)
	runLimits, err := effectiveLimits(req.Limits, def.Limits, c, rs.tc.runHeadroom, rs.tc.name, "limits.")
	if err != nil {
		return Result{}, err
	}
	var compileLimits execbox.Limits
	if rs.tc.compile != nil {
		// Defaults only: errors cannot arise.
		compileLimits, _ = effectiveLimits(execbox.Limits{}, def.CompileLimits, c, rs.tc.compileHeadroom, rs.tc.name, "compile_limits.")
	}

	id, err := newRunID()
	if err != nil {
		return Result{}, err
	}
	rel := path.Join(RunsDir, id)
	rc := &runContext{
		dir:          path.Join(r.sb.Workspace(), rel),
		main:         lang.mainFile(),
		args:         req.Args,
		compileFlags: req.CompileFlags,
		cacheDir:     r.cacheDir(),
	}
	for _, f := range req.Files {
		rc.files = append(rc.files, f.Path)
	}
	res := Result{Language: lang, Toolchain: rs.tc.name, Version: rs.version, Dir: rel}
	if err := r.writeRun(ctx, rel, rs, rc, &req); err != nil {
		r.cleanup(ctx, rel)
		return Result{}, err
	}

	env := map[string]string{"HOME": rc.dir}
	if rs.tc.env != nil {
		maps.Copy(env, rs.tc.env(rs, rc))
	}
	maps.Copy(env, req.Env)

	if rs.tc.compile != nil {
		argv := rs.tc.compile(rs, rc)
		cres, err := r.sb.Exec(ctx, execbox.ExecRequest{
			Command:     argv,
			Dir:         rel,
			Env:         env,
			EnvPolicy:   execbox.EnvClean,
			Timeout:     orDefault(req.CompileTimeout, def.CompileTimeout),
			OutputLimit: req.OutputLimit,
			Limits:      compileLimits,
		})
		res.Compile = &cres
		if err != nil || !cres.Success() {
			res.Result, res.Phase, res.Command, res.Limits = cres, PhaseCompile, argv, compileLimits
			return r.finish(ctx, &req, res, lang, err)
		}
	}
	argv := rs.tc.run(rs, rc)
	rres, err := r.runPhase(ctx, &req, execbox.ExecRequest{
		Command:     argv,
		Stdin:       req.Stdin,
		Dir:         rel,
		Env:         env,
		EnvPolicy:   execbox.EnvClean,
		Timeout:     orDefault(req.Timeout, def.Timeout),
		OutputLimit: req.OutputLimit,
		Limits:      runLimits,
	})
	res.Result, res.Phase, res.Command, res.Limits = rres, PhaseRun, argv, runLimits
	return r.finish(ctx, &req, res, lang, err)
}

// writeRun creates the run directory and writes the source, the request's
// files and the toolchain's generated files.
func (r *Runner) writeRun(ctx context.Context, rel string, rs *resolved, rc *runContext, req *Request) error {
	files := r.sb.Files()
	if err := files.Mkdir(ctx, rel, execbox.MkdirOptions{Parents: true}); err != nil {
		return fmt.Errorf("create run directory %s: %w", rel, err)
	}
	if err := files.WriteFile(ctx, path.Join(rel, rc.main), []byte(req.Source), execbox.WriteOptions{}); err != nil {
		return fmt.Errorf("write %s: %w", rc.main, err)
	}
	for i, f := range req.Files {
		if err := files.WriteFile(ctx, path.Join(rel, f.Path), f.Content, execbox.WriteOptions{Mode: f.Mode, Parents: true}); err != nil {
			return fmt.Errorf("files[%d]: write %s: %w", i, f.Path, err)
		}
	}
	if rs.tc.setup != nil {
		for name, content := range rs.tc.setup(rs, rc) {
			if err := files.WriteFile(ctx, path.Join(rel, name), []byte(content), execbox.WriteOptions{}); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		}
	}
	return nil
}

// finish handles the end of a run: an error from Exec, and Cleanup.
func (r *Runner) finish(ctx context.Context, req *Request, res Result, lang Language, err error) (Result, error) {
	if err != nil && ctx.Err() == nil && errors.Is(err, execbox.ErrNotFound) {
		// The resolved binary went away: resolve again next time.
		r.forget(lang)
	}
	if req.Cleanup {
		r.cleanup(ctx, res.Dir)
		res.Dir = ""
	}
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return res, ctx.Err()
	}
	return res, fmt.Errorf("%s: %s: %w", lang, res.Phase, err)
}

// cleanup removes a run directory even when ctx has ended.
func (r *Runner) cleanup(ctx context.Context, rel string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = r.sb.Files().Remove(ctx, rel, execbox.RemoveOptions{Recursive: true})
}

// Remove deletes a run directory (a Result.Dir) of sb and everything in
// it. A directory that is not under RunsDir is an ErrInvalidArgument
// *FieldError for "dir"; one already gone is not an error.
func Remove(ctx context.Context, sb execbox.Sandbox, dir string) error {
	d := path.Clean(strings.TrimPrefix(dir, "./"))
	parent, name := path.Split(d)
	if path.Clean(parent) != RunsDir || name == "" || name == "." || name == ".." {
		return execbox.Invalid("dir", "%q is not a run directory (%s/ID)", dir, RunsDir)
	}
	err := sb.Files().Remove(ctx, d, execbox.RemoveOptions{Recursive: true})
	if errors.Is(err, execbox.ErrNotFound) {
		return nil
	}
	return err
}

// RemoveAll deletes every run directory of sb.
func RemoveAll(ctx context.Context, sb execbox.Sandbox) error {
	err := sb.Files().Remove(ctx, RunsDir, execbox.RemoveOptions{Recursive: true})
	if errors.Is(err, execbox.ErrNotFound) {
		return nil
	}
	return err
}

// newRunID returns a unique ID that sorts by creation time.
func newRunID() (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b), nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// runPhase runs the program: Exec, or, when req streams its output,
// Start with flow-controlled events copied to req.Stdout and req.Stderr.
func (r *Runner) runPhase(ctx context.Context, req *Request, ereq execbox.ExecRequest) (execbox.Result, error) {
	if req.Stdout == nil && req.Stderr == nil {
		return r.sb.Exec(ctx, ereq)
	}
	ereq.FlowControl = true
	p, err := r.sb.Start(ctx, ereq)
	if err != nil {
		return execbox.Result{}, err
	}
	if ereq.Stdin == nil {
		_ = p.CloseStdin(ctx)
	}
	err = copyEvents(ctx, p, req.Stdout, req.Stderr)
	if err != nil {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = p.Kill(kctx)
		res, _ := p.Wait(kctx)
		return res, err
	}
	return p.Wait(ctx)
}

// copyEvents writes p's output events to stdout and stderr (either may
// be nil) until the exit event. Output it was told was dropped is an
// error: a stream must be whole.
func copyEvents(ctx context.Context, p execbox.Process, stdout, stderr io.Writer) error {
	for ev, err := range p.Events(ctx, 1) {
		if err != nil {
			return err
		}
		w, name := stdout, "stdout"
		switch ev.Kind {
		case execbox.EventStderr:
			w, name = stderr, "stderr"
		case execbox.EventStdout:
		case execbox.EventDropped:
			return fmt.Errorf("output: %d bytes were lost before they could be streamed", ev.Dropped)
		case execbox.EventExit:
			return nil
		default:
			continue
		}
		if w != nil {
			if _, err := w.Write(ev.Data); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return ctx.Err()
}
