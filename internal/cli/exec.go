package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/config"
)

var execCommand = &command{
	name:    "exec",
	summary: "run a command and stream its output",
	args:    "[flags] [--] COMMAND [ARG...]",
	help: `Exec runs COMMAND with its arguments (no shell: use sh -c 'LINE' for one),
streams its standard output and error live to execbox's own, copies
execbox's standard input to it, and exits with its exit code: 124 if it timed
out, 128+N if signal N killed it. A note on stderr says why a command that did
not simply exit ended (timeout, signal, limit).

The workspace is the current directory, so 'execbox exec -- ls' lists it,
unless --workspace, $EXECBOX_WORKSPACE or the config's workspace names
another directory (a workspace is never removed) or --temp-workspace asks for
a new temporary one, removed afterwards. The sandbox runtime refuses a
workspace that is /, a system directory (/etc, /usr, /var, /run, ...) or
root's home, so that running execbox from there does not hand it to the
command read-write; --allow-system-workspace allows it. Commands get a clean environment
(PATH, LANG, HOME set to the workspace) unless --env-policy or --env say
otherwise.

--output-limit caps what the result keeps of each stream (its head and
tail), which is what --json prints; streamed output is shown in full.
--json prints the result as the HTTP API's Result: {"reason", "exit_code",
"signal", "detail", "stdout", "stderr", "duration_ms", "user_time_ms",
"system_time_ms", "peak_memory", "shell"}, each stream as {"text"} when it is valid
UTF-8, else {"data"} (base64), with "total", "omitted" and "omitted_at".

On SIGINT or SIGTERM execbox kills the command's whole process tree and exits
130 or 143. If execbox cannot run the command it exits 125 (126 if the
program cannot be executed, 127 if it is not found), and 2 for a usage or
configuration error.`,
	run: runExec,
}

// envFlag collects repeated --env values.
type envFlag []string

func (e *envFlag) String() string     { return strings.Join(*e, ",") }
func (e *envFlag) Set(s string) error { *e = append(*e, s); return nil }

// resolve turns the --env values into variables: NAME=VALUE sets one, a
// bare NAME copies it from lookup (and is skipped if unset there).
func (e envFlag) resolve(lookup func(string) (string, bool)) (map[string]string, error) {
	var env map[string]string
	var errs []error
	for _, kv := range e {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" {
			errs = append(errs, fmt.Errorf("--env: %q has no variable name", kv))
			continue
		}
		if !ok {
			if v, ok = lookup(k); !ok {
				continue
			}
		}
		if env == nil {
			env = map[string]string{}
		}
		env[k] = v
	}
	return env, errors.Join(errs...)
}

func runExec(ctx context.Context, c *command, s *stdio, args []string) int {
	fs := newFlagSet(c)
	var cf config.Flags
	cf.Register(fs, slices.Concat(sandboxKeys, []string{"exec.timeout", "exec.output_limit"})...)
	pf := registerPlaceFlags(fs, "command")
	jsonOut := fs.Bool("json", false, "print the result as JSON (as the HTTP API does) instead of streaming")
	commit := fs.String("commit", "", "with --image, when the command succeeds, save what it changed in the sandbox's root (not the workspace) as a new image at `DEST`: a registry reference, or ./DIR[:TAG] for an OCI layout")
	if code, done := s.parse(c, fs, args); done {
		return code
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return s.fail(ExitUsage, errors.New("exec: no command given (usage: execbox exec [flags] -- COMMAND [ARG...])"))
	}
	env, err := pf.check(fs, "exec")
	if err != nil {
		return s.fail(ExitUsage, err)
	}
	cfg, code, ok := s.loadConfig(&cf)
	if !ok {
		return code
	}
	logger := cfg.Logger(s.err)

	spec := cfg.Spec()
	if spec.Workspace, err = interactiveWorkspace(cfg, *pf.tempWS); err != nil {
		return s.fail(ExitFailure, err)
	}
	spec.AllowSystemWorkspace = *pf.allowSys
	req := cfg.ExecRequest()
	req.Command = argv
	req.Env = env
	req.Dir = *pf.workdir
	if err := errors.Join(spec.Validate(), req.Validate()); err != nil {
		return s.fail(ExitUsage, annotate(cfg, err))
	}
	if *commit != "" && spec.Image == "" {
		return s.fail(ExitUsage, errors.New("exec: --commit needs --image: a new image is the changes over one"))
	}

	sb, closeSandbox, status, ok := s.createSandbox(ctx, cfg, logger, spec)
	if !ok {
		return status
	}
	defer closeSandbox()
	// Stdin streams with the start (one request over the protocol, not
	// one per read); without any, the command reads EOF at once.
	req.Stdin = s.in
	// Streamed, every byte is shown: a slow stdout slows the command, as
	// a pipe would, rather than dropping output.
	req.FlowControl = !*jsonOut
	p, err := sb.Start(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx)
		}
		return s.fail(startErrorCode(err), annotate(cfg, err))
	}

	f := &follower{s: s, p: p, stream: !*jsonOut}
	res, err := f.wait(ctx, req.GracePeriod)
	switch {
	case ctx.Err() != nil:
		return interrupted(ctx)
	case errors.Is(err, syscall.EPIPE):
		return 128 + int(syscall.SIGPIPE) // our reader went away, as a pipeline's writer dies
	case err != nil:
		return s.fail(ExitFailure, err)
	}

	if *jsonOut {
		// The HTTP API's form: durations in milliseconds, output as text
		// when it is valid UTF-8, else base64 data.
		if err := printJSON(s.out, api.NewResult(res)); err != nil {
			return s.fail(ExitFailure, fmt.Errorf("stdout: %w", err))
		}
	}
	if note := describe(res, req.Timeout); note != "" {
		s.warn("%s", note)
	}
	if *commit != "" {
		if code := commitImage(ctx, s, sb, res, *commit); code != 0 {
			return code
		}
	}
	lost := false
	for _, o := range []struct {
		name  string
		out   execbox.Output
		shown int64
	}{{"stdout", res.Stdout, f.shown[0]}, {"stderr", res.Stderr, f.shown[1]}} {
		switch {
		case f.stream && o.shown < o.out.Total:
			// What the user saw is the truth here, not the kept result.
			s.warn("%s: %d of %d bytes were not shown (lost before they could be streamed)", o.name, o.out.Total-o.shown, o.out.Total)
			lost = true
		case !f.stream && o.out.Truncated():
			s.warn("%s truncated: %d of %d bytes omitted from the middle (see --output-limit)", o.name, o.out.Omitted, o.out.Total)
		}
		if o.out.HeldOpen {
			s.warn("%s: a process the command left running still held it open; what it wrote later is not shown", o.name)
		}
	}
	if f.stream && f.gap && !lost {
		s.warn("%d bytes of output were not shown (lost before they could be streamed)", f.dropped)
		lost = true
	}
	if lost {
		// Every byte, or a loud failure: not the command's exit code.
		return s.fail(ExitFailure, errors.New("exec: output was lost"))
	}
	return res.ShellExitCode()
}

// commitImage saves sb's root changes as the image dest (exec --commit)
// if the command succeeded, and says so on stderr; it returns the exit
// code of a failure, 0 otherwise.
func commitImage(ctx context.Context, s *stdio, sb execbox.Sandbox, res execbox.Result, dest string) int {
	if !res.Success() {
		s.warn("not committed: the command did not succeed")
		return 0
	}
	ic, ok := sb.(execbox.ImageCommitter)
	if !ok {
		return s.fail(ExitFailure, fmt.Errorf("exec --commit: the runtime cannot save a sandbox as an image (the sandbox runtime can)"))
	}
	c, err := ic.CommitImage(ctx, dest)
	if err != nil {
		return s.fail(ExitFailure, fmt.Errorf("exec --commit: %w", err))
	}
	s.warn("committed %s (%s)", c.Ref, c.Digest)
	return 0
}

// annotate names the flag or config source behind each *execbox.FieldError
// in err: config fields through cfg, and --workdir and --env, which are not
// config fields.
func annotate(cfg *config.Config, err error) error {
	var out []error
	for _, e := range leaves(cfg.Annotate(err)) {
		var fe *execbox.FieldError
		var se *config.SourceError
		if !errors.As(e, &se) && errors.As(e, &fe) {
			switch {
			case fe.Field == "dir":
				e = &config.SourceError{Source: "--workdir", Err: fe}
			case fe.Field == "env" || strings.HasPrefix(fe.Field, "env."):
				e = &config.SourceError{Source: "--env", Err: fe}
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// describe says in words why a command that did not simply exit ended.
func describe(res execbox.Result, timeout time.Duration) string {
	var note string
	switch res.Reason {
	case execbox.ReasonExited, "":
		return ""
	case execbox.ReasonTimedOut:
		if timeout == 0 {
			timeout = execbox.DefaultTimeout
		}
		note = fmt.Sprintf("timed out after %s", timeout)
	case execbox.ReasonSignaled:
		note = fmt.Sprintf("killed by signal %s", res.Signal)
	case execbox.ReasonOOMKilled:
		note = "killed: out of memory"
	case execbox.ReasonCPULimit:
		note = "killed: CPU time limit exceeded"
	case execbox.ReasonOutputLimit:
		note = "killed: output limit exceeded"
	case execbox.ReasonKilled:
		note = "killed"
	case execbox.ReasonError:
		note = "lost track of the command"
	default:
		note = string(res.Reason)
	}
	if res.Detail != "" {
		note += ": " + res.Detail
	}
	return note
}

// errorCode is the exit code for an error opening a runtime or creating a
// sandbox: a usage error for a bad or unknown name or value, else 125.
func errorCode(err error) int {
	var fe *execbox.FieldError
	switch {
	case errors.Is(err, execbox.ErrInvalidArgument) && !errors.Is(err, execbox.ErrUnsupported):
		return ExitUsage
	case errors.As(err, &fe) && fe.Field == "runtime" && errors.Is(err, execbox.ErrNotFound):
		return ExitUsage
	case errors.As(err, &fe) && fe.Field == "dir" && errors.Is(err, execbox.ErrPermission):
		return ExitUsage // --workdir leaves the workspace
	}
	return ExitFailure
}

// startErrorCode is the exit code for an error starting the command: 127
// for a program that is not found, 126 for one that cannot be executed,
// as a shell reports them.
func startErrorCode(err error) int {
	var fe *execbox.FieldError
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno) && errno == syscall.ENOENT,
		errors.As(err, &fe) && strings.HasPrefix(fe.Field, "command") && errors.Is(err, execbox.ErrNotFound):
		return ExitNotFound
	case errors.As(err, &errno) && (errno == syscall.EACCES || errno == syscall.ENOEXEC || errno == syscall.EISDIR),
		errors.As(err, &fe) && strings.HasPrefix(fe.Field, "command") && errors.Is(err, execbox.ErrPermission):
		return ExitCannotExec
	}
	return errorCode(err)
}

// follower follows one started process.
type follower struct {
	s       *stdio
	p       execbox.Process
	stream  bool     // write output events to stdout and stderr
	shown   [2]int64 // bytes of stdout and stderr written
	dropped int64    // bytes the events said they left out
	gap     bool     // a dropped event came
}

// wait copies (when streaming) the process's output to stdout and stderr
// until it ends, and returns its result. If ctx ends first, or stdout or
// stderr fails, it kills the process tree and returns the error. It does
// not wait for a read of stdin (given to Start) to return: a terminal
// that is never typed into must not keep execbox alive.
func (r *follower) wait(ctx context.Context, grace time.Duration) (execbox.Result, error) {
	if r.s.in == nil {
		_ = r.p.CloseStdin(ctx) // no stdin: EOF at once
	}
	var res *execbox.Result
	var err error
	for ev, evErr := range r.p.Events(ctx, 1) {
		if evErr != nil {
			err = evErr
			break
		}
		switch ev.Kind {
		case execbox.EventStdout:
			err = r.write(r.s.out, 0, ev.Data, "stdout")
		case execbox.EventStderr:
			err = r.write(r.s.err, 1, ev.Data, "stderr")
		case execbox.EventDropped:
			r.dropped += max(ev.Dropped, 0)
			r.gap = true
		case execbox.EventExit:
			res = ev.Result
		}
		if err != nil || res != nil {
			break
		}
	}
	if err == nil && res == nil {
		var final execbox.Result
		if final, err = r.p.Wait(ctx); err == nil {
			res = &final
		}
	}
	if err != nil || ctx.Err() != nil {
		r.kill(ctx, grace)
		if err == nil {
			err = ctx.Err()
		}
		return execbox.Result{}, err
	}
	return *res, nil
}

func (r *follower) write(w io.Writer, i int, data []byte, name string) error {
	if !r.stream {
		return nil
	}
	n, err := w.Write(data)
	r.shown[i] += int64(n)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// kill ends the process tree, even though ctx may be done.
func (r *follower) kill(ctx context.Context, grace time.Duration) {
	if grace == 0 {
		grace = execbox.DefaultGracePeriod
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace+30*time.Second)
	defer cancel()
	if err := r.p.Kill(kctx); err != nil {
		r.s.warn("kill: %v", err)
	}
}

// sandboxKeys are the config keys whose flags exec and shell take: which
// runtime, and the sandbox it makes (the server's keys are serve's).
var sandboxKeys = []string{"runtime", "isolation", "network", "workspace", "workspace_size",
	"image", "images.dir", "images.max_size", "exec.grace_period", "exec.env_policy", "exec.env_allow",
	"limits.cpu_time", "limits.file_size", "limits.open_files", "limits.address_space",
	"limits.memory", "limits.pids", "limits.cpus", "log.level", "log.format"}

// placeFlags are the flags exec and shell share: where the program runs
// and the variables it is given.
type placeFlags struct {
	envs     envFlag
	workdir  *string
	tempWS   *bool
	allowSys *bool
}

// registerPlaceFlags adds --env, --workdir, --temp-workspace and
// --allow-system-workspace to fs;
// what names the thing run in their help ("command", "program").
func registerPlaceFlags(fs *flag.FlagSet, what string) *placeFlags {
	pf := &placeFlags{}
	fs.Var(&pf.envs, "env", "set `NAME=VALUE` for the "+what+" (repeatable); a bare NAME copies execbox's own")
	pf.workdir = fs.String("workdir", "", "working `DIR` of the "+what+", relative to the workspace (default the workspace)")
	pf.tempWS = fs.Bool("temp-workspace", false, "run in a new temporary workspace, removed afterwards")
	pf.allowSys = fs.Bool("allow-system-workspace", false, "let the sandbox write a workspace that is /, a system directory or root's home (refused by default)")
	return pf
}

// check refuses --temp-workspace together with --workspace and returns
// the --env variables; cmd names the subcommand in errors.
func (pf *placeFlags) check(fs *flag.FlagSet, cmd string) (map[string]string, error) {
	workspaceFlag := false
	fs.Visit(func(f *flag.Flag) { workspaceFlag = workspaceFlag || f.Name == "workspace" })
	if *pf.tempWS && workspaceFlag {
		return nil, fmt.Errorf("%s: --temp-workspace and --workspace cannot be used together", cmd)
	}
	return pf.envs.resolve(os.LookupEnv)
}
