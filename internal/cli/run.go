package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/internal/config"
	"github.com/execbox/execbox/internal/hostpath"
)

var runCommand = &command{
	name:    "run",
	summary: "run a program in a language (python, javascript, go, ...)",
	args:    "--lang L [flags] (-c CODE | FILE | -) [ARG...]",
	help: `Run runs a program written in language L: the source is CODE (-c), the file
FILE, or execbox's standard input (-); the remaining arguments are the
program's. Flags go before the source. Languages: ` + languageList() + `
(aliases: py, js, node, ts, c#, cs, golang, c++).

Compiled languages (go, c, cpp, csharp, and typescript through esbuild) are
compiled first, with their own timeout (--compile-timeout). The program's
standard output and error are streamed as it runs, every byte of them (a
slow reader slows the program; --output-limit bounds only what --json
keeps), and execbox exits with its code: 124 if it timed out, 128+N if signal N killed it. If compiling
fails, the compiler's output is printed and execbox exits with the
compiler's code, with a note saying so. A note on stderr says why a program
that did not simply exit ended (timeout, CPU limit, signal).

The program's standard input is execbox's own, or --stdin-file F (empty when
the source is read from -). Its environment is PATH, LANG and HOME (its run
directory) plus what the toolchain needs and --env; nothing else of the host.

Each language has default limits (CPU time 10s, memory 512 MiB, or 1 GiB for
javascript, typescript and csharp; wall clock 60s); --timeout and the limit
flags override them. Without a memory cgroup (the local runtime) a memory
limit is applied as an address-space limit with headroom for what the
interpreter reserves.

The program runs in a new directory .execbox/runs/ID of the workspace. The
workspace is a temporary directory, removed afterwards, unless --workspace
or the configuration names one: then the run directory, with every file the
program wrote, is kept and its path printed on stderr.

--json prints the result as exec --json does (the HTTP API's Result),
with the run's "phase" (compile or run), "compile" (the compile step's
Result), "language", "toolchain", "version", "command", "limits" and "dir"
beside its fields.

--languages lists the languages and the interpreter or compiler found for
each (or what to install), and exits; with --json as an array of
{"language", "available", "toolchain", "path", "version", "detail",
"toolchains"}.

Exit codes of execbox itself: 2 for a usage error (unknown language, no
source), 127 when the language has no interpreter on the runtime, 125 when
execbox could not run the program.`,
	run: runRun,
}

func languageList() string {
	var names []string
	for _, l := range code.Languages() {
		names = append(names, string(l))
	}
	return strings.Join(names, ", ")
}

func runRun(ctx context.Context, c *command, s *stdio, args []string) int {
	fs := newFlagSet(c)
	var cf config.Flags
	cf.Register(fs, "runtime", "workspace", "image", "exec.timeout", "exec.output_limit",
		"limits.cpu_time", "limits.file_size", "limits.open_files", "limits.address_space",
		"limits.memory", "limits.pids", "limits.cpus", "log.level", "log.format")
	lang := fs.String("lang", "", "`LANGUAGE` of the program: "+languageList())
	src := fs.String("c", "", "the program's source `CODE`")
	stdinFile := fs.String("stdin-file", "", "read the program's standard input from `FILE`")
	compileTimeout := fs.Duration("compile-timeout", 0, "wall-clock limit of the compile step (default 2m)")
	var envs envFlag
	fs.Var(&envs, "env", "set `NAME=VALUE` for the program (repeatable); a bare NAME copies execbox's own")
	var files envFlag
	fs.Var(&files, "file", "copy host file `HOSTPATH` into the run directory as itself, or NAME=HOSTPATH (repeatable)")
	jsonOut := fs.Bool("json", false, "print the result as JSON (as the HTTP API does) instead of the output")
	list := fs.Bool("languages", false, "list the languages and their interpreters on the runtime, and exit")
	toolchain := fs.String("toolchain", "", "`NAME` of the toolchain to run the language with (node or bun for javascript; node+esbuild, node or bun for typescript; see --languages)")
	useCache := fs.Bool("cache", false, "run in execbox's cache directory instead of a new temporary workspace, so that compiler caches (Go's build cache) serve the next --cache run; what one run writes there, the next sees")
	if exit, done := s.parse(c, fs, args); done {
		return exit
	}
	srcSet := false
	fs.Visit(func(f *flag.Flag) { srcSet = srcSet || f.Name == "c" })

	cfg, exit, ok := s.loadConfig(&cf)
	if !ok {
		return exit
	}
	if *list {
		return listLanguages(ctx, s, cfg, *jsonOut)
	}

	req, err := runRequest(s, cfg, *lang, *src, srcSet, fs.Args(), *stdinFile, files)
	if err != nil {
		return s.fail(ExitUsage, err)
	}
	if req.Env, err = envs.resolve(os.LookupEnv); err != nil {
		return s.fail(ExitUsage, err)
	}
	req.CompileTimeout = *compileTimeout
	if err := req.Validate(); err != nil {
		return s.fail(ExitUsage, annotateRun(cfg, err))
	}

	opts, err := runOptions(req.Language, *toolchain)
	if err != nil {
		return s.fail(ExitUsage, err)
	}

	spec := cfg.Spec()
	spec.Limits = execbox.Limits{} // the program's, in req.Limits
	cacheWS, err := cacheWorkspace(cfg, *useCache)
	if err != nil {
		return s.fail(ExitFailure, err)
	}
	if cacheWS != "" {
		spec.Workspace, spec.AllowSystemWorkspace = cacheWS, true
	}
	sb, closeSandbox, status, ok := s.createSandbox(ctx, cfg, cfg.Logger(s.err), spec)
	if !ok {
		return status
	}
	defer closeSandbox()
	runner := code.NewRunner(sb, opts)
	if !*jsonOut {
		// The program's output is shown as it comes, every byte of it;
		// the result's (head and tail) only for a failed compile step.
		req.Stdout, req.Stderr = s.out, s.err
	}
	res, err := runner.Run(ctx, req)
	if cacheWS != "" && res.Dir != "" {
		// The run directory goes, as with a temporary workspace (--json
		// still names it); the caches beside it stay.
		defer func() {
			if err := code.Remove(context.WithoutCancel(ctx), sb, res.Dir); err != nil {
				s.warn("remove the run directory: %v", err)
			}
		}()
	}
	switch {
	case ctx.Err() != nil:
		return interrupted(ctx)
	case errors.Is(err, execbox.ErrNotFound):
		return s.fail(ExitNotFound, err)
	case err != nil:
		return s.fail(errorCode(err), annotateRun(cfg, err))
	}

	if *jsonOut {
		if err := printJSON(s.out, newRunReport(res)); err != nil {
			return s.fail(ExitFailure, fmt.Errorf("stdout: %w", err))
		}
	} else if res.Phase == code.PhaseCompile {
		if _, err := s.out.Write(res.Stdout.Data); err != nil {
			return s.fail(ExitFailure, fmt.Errorf("stdout: %w", err))
		}
		s.err.Write(res.Stderr.Data)
	}
	timeout := req.Timeout
	if res.Phase == code.PhaseCompile {
		timeout = req.CompileTimeout
	}
	if timeout == 0 {
		d := code.DefaultsFor(res.Language)
		timeout = d.Timeout
		if res.Phase == code.PhaseCompile {
			timeout = d.CompileTimeout
		}
	}
	note := describe(res.Result, timeout)
	if res.Phase == code.PhaseCompile {
		if note == "" {
			note = res.Result.String()
		}
		note = "compile failed: " + note
	}
	if note != "" {
		s.warn("%s", note)
	}
	if !*jsonOut && res.Phase == code.PhaseCompile {
		for _, o := range []struct {
			name string
			out  execbox.Output
		}{{"stdout", res.Stdout}, {"stderr", res.Stderr}} {
			if o.out.Truncated() {
				s.warn("%s truncated: %d of %d bytes omitted from the middle (see --output-limit)", o.name, o.out.Omitted, o.out.Total)
			}
		}
	}
	if cfg.IsSet("workspace") && res.Dir != "" {
		s.warn("run directory: %s", filepath.Join(sb.Workspace(), res.Dir))
	}
	return res.ShellExitCode()
}

// runOptions are the code options of --toolchain: that toolchain alone
// for lang, checked against the language's (code.Options.Toolchains).
func runOptions(lang code.Language, toolchain string) (code.Options, error) {
	if toolchain == "" {
		return code.Options{}, nil
	}
	l, err := code.ParseLanguage(string(lang))
	if err != nil {
		return code.Options{}, &config.SourceError{Source: "--lang", Err: execbox.Invalid("language", "%v", err)}
	}
	opts := code.Options{Toolchains: map[code.Language][]string{l: {toolchain}}}
	if err := opts.Validate(); err != nil {
		var fe *execbox.FieldError
		if errors.As(err, &fe) {
			return code.Options{}, &config.SourceError{Source: "--toolchain", Err: fe}
		}
		return code.Options{}, fmt.Errorf("--toolchain: %w", err)
	}
	return opts, nil
}

// cacheWorkspace is the workspace of a run asking for --cache: a
// directory of execbox's own (hostpath.CacheDir("run")) rather than a
// temporary one, so that compilers' caches in it (Go's build cache, .NET's
// packages: code.DefaultCacheDir) serve the next run, which would
// otherwise rebuild Go's standard library (12-26 s) every time; the run
// directory itself is removed at the end. It is opt-in: runs sharing a
// writable cache are not independent (one run's program can leave what
// the next compiles with), which an evaluation must not get by default.
// "" for a temporary workspace: without --cache, with a configured
// workspace (its own cache), or on the remote runtime (a server refuses
// host paths).
func cacheWorkspace(cfg *config.Config, useCache bool) (string, error) {
	if !useCache || cfg.IsSet("workspace") || cfg.Runtime == "remote" {
		return "", nil
	}
	dir, err := hostpath.CacheDir("run")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("run workspace: %w", err)
	}
	return dir, nil
}

// runRequest builds the request from the command line: the source from -c,
// FILE or stdin, the arguments, stdin, files, timeout and limits.
func runRequest(s *stdio, cfg *config.Config, lang, src string, srcSet bool, args []string, stdinFile string, files envFlag) (code.Request, error) {
	var errs []error
	req := code.Request{Language: code.Language(lang), Source: src}
	if lang == "" {
		errs = append(errs, fmt.Errorf("run: --lang is required (one of %s)", languageList()))
	}
	stdinUsed := false
	switch {
	case srcSet:
		req.Args = args
	case len(args) == 0:
		errs = append(errs, errors.New("run: no program given (usage: execbox run --lang L (-c CODE | FILE | -) [ARG...])"))
	case args[0] == "-":
		b, err := io.ReadAll(orEmpty(s.in))
		if err != nil {
			errs = append(errs, fmt.Errorf("run: read the program from stdin: %w", err))
		}
		req.Source, req.Args, stdinUsed = string(b), args[1:], true
	default:
		b, err := os.ReadFile(args[0])
		if err != nil {
			errs = append(errs, fmt.Errorf("run: %w", err))
		}
		req.Source, req.Args = string(b), args[1:]
	}
	switch {
	case stdinFile != "":
		f, err := os.ReadFile(stdinFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--stdin-file: %w", err))
		}
		req.Stdin = strings.NewReader(string(f))
	case !stdinUsed && s.in != nil:
		req.Stdin = s.in
	}
	for _, f := range files {
		name, host, ok := strings.Cut(f, "=")
		if !ok {
			name, host = filepath.Base(f), f
		}
		b, err := os.ReadFile(host)
		if err != nil {
			errs = append(errs, fmt.Errorf("--file: %w", err))
			continue
		}
		fi, _ := os.Stat(host)
		req.Files = append(req.Files, code.File{Path: name, Content: b, Mode: fi.Mode().Perm()})
	}
	if cfg.IsSet("exec.timeout") {
		req.Timeout = cfg.Exec.Timeout
	}
	req.OutputLimit = int64(cfg.Exec.OutputLimit)
	req.Limits = cfg.Spec().Limits
	return req, errors.Join(errs...)
}

func orEmpty(r io.Reader) io.Reader {
	if r == nil {
		return strings.NewReader("")
	}
	return r
}

// annotateRun names the flag behind each *execbox.FieldError of a run
// request: --lang, the source, and the config flags (limits.*) through cfg.
func annotateRun(cfg *config.Config, err error) error {
	var out []error
	for _, e := range leaves(annotate(cfg, err)) {
		var fe *execbox.FieldError
		var se *config.SourceError
		if !errors.As(e, &se) && errors.As(e, &fe) {
			switch {
			case fe.Field == "language":
				e = &config.SourceError{Source: "--lang", Err: fe}
			case fe.Field == "source":
				e = &config.SourceError{Source: "program", Err: fe}
			case fe.Field == "compile_timeout":
				e = &config.SourceError{Source: "--compile-timeout", Err: fe}
			case strings.HasPrefix(fe.Field, "files["):
				e = &config.SourceError{Source: "--file", Err: fe}
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// listLanguages prints each language's toolchain on the configured
// runtime. It exits 0 when every language is available, else 1.
func listLanguages(ctx context.Context, s *stdio, cfg *config.Config, jsonOut bool) int {
	spec := cfg.Spec()
	spec.Limits = execbox.Limits{}
	if !cfg.IsSet("workspace") {
		spec.Workspace = ""
	}
	rt, err := cfg.OpenRuntime(ctx, cfg.Logger(s.err), s.err)
	if err != nil {
		return s.fail(errorCode(err), cfg.Annotate(err))
	}
	sb, err := rt.Create(ctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx)
		}
		return s.fail(errorCode(err), annotate(cfg, err))
	}
	defer sb.Close()
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	st, err := code.NewRunner(sb, code.Options{}).Probe(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx)
		}
		return s.fail(ExitFailure, err)
	}
	langs := newLanguageReports(st)
	if jsonOut {
		if err := printJSON(s.out, langs); err != nil {
			return s.fail(ExitFailure, err)
		}
	} else if err := printLanguages(s.out, langs); err != nil {
		return s.fail(ExitFailure, err)
	}
	for _, l := range st {
		if !l.Available {
			return 1
		}
	}
	return 0
}

// printLanguages prints the toolchain table of run --languages and
// health.
func printLanguages(w io.Writer, st []languageReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LANGUAGE\tAVAILABLE\tTOOLCHAIN\tVERSION\tPATH OR WHAT TO INSTALL")
	for _, l := range st {
		if l.Available {
			fmt.Fprintf(tw, "%s\tyes\t%s\t%s\t%s\n", l.Language, l.Toolchain, l.Version, l.Path)
		} else {
			fmt.Fprintf(tw, "%s\tno\t-\t-\t%s\n", l.Language, l.Detail)
		}
	}
	return tw.Flush()
}
