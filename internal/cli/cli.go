// Package cli is the execbox command: one file per subcommand, and Main,
// which cmd/execbox calls.
//
// Exit codes: a command run by `execbox exec` passes its own code through
// (124 for a timeout, 128+N for a signal, as a shell reports them). execbox
// itself exits 2 for a usage error (bad flag, bad configuration, unknown
// runtime), 125 when it could not run the command (as docker run does),
// 126 when the program cannot be executed and 127 when it is not found (as
// a shell does), and 128+N when it was itself stopped by signal N.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/config"

	_ "github.com/execbox/execbox/runtimes/all" // every runtime
)

// Exit codes of execbox itself.
const (
	ExitUsage      = 2   // bad command line or configuration
	ExitFailure    = 125 // execbox could not do what was asked
	ExitCannotExec = 126 // the program exists but cannot be executed
	ExitNotFound   = 127 // the program does not exist
)

// command is one subcommand.
type command struct {
	name    string
	summary string // one line for the command list
	args    string // synopsis after "execbox NAME"
	help    string // paragraphs shown by "execbox help NAME"
	run     func(ctx context.Context, c *command, s *stdio, args []string) int
}

// commands lists the subcommands in the order help shows them; init fills
// it, since help refers to it.
var commands []*command

func init() {
	commands = []*command{execCommand, healthCommand, versionCommand, helpCommand, gitCommand, imageCommand, parallelCommand, runCommand, serveCommand, shellCommand}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// stdio is the standard streams of one Main call.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// Main runs the execbox command line args (without the program name) and
// returns the process exit code. Cancelling ctx (main cancels it on SIGINT
// or SIGTERM, through signal.NotifyContext) stops a running command, kills
// its whole process tree, and makes Main return 128+N for signal N. Main
// never panics: an internal error is one line on stderr and code 125.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	// Runtimes log to stderr from their own goroutines.
	stderr = &lockedWriter{w: stderr}
	s := &stdio{in: stdin, out: stdout, err: stderr}
	defer func() {
		if v := recover(); v != nil {
			fmt.Fprintf(stderr, "execbox: internal error: %v\n", v)
			if os.Getenv("EXECBOX_LOG_LEVEL") == "debug" {
				stderr.Write(debug.Stack())
			}
			code = ExitFailure
		}
	}()
	if len(args) == 0 {
		printMainUsage(stderr)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		printMainUsage(stdout)
		return 0
	case "-version", "--version":
		return versionCommand.run(ctx, versionCommand, s, args[1:])
	}
	c := lookup(args[0])
	if c == nil {
		return s.fail(ExitUsage, fmt.Errorf("unknown command %q (commands: %s; see 'execbox help')", args[0], commandNames()))
	}
	return c.run(ctx, c, s, args[1:])
}

func commandNames() string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// fail prints each problem joined in err as one line "execbox: ..." and
// returns code.
func (s *stdio) fail(code int, err error) int {
	for _, e := range leaves(err) {
		msg := strings.ReplaceAll(strings.TrimSpace(e.Error()), "\n", "\n    ")
		fmt.Fprintf(s.err, "execbox: %s\n", msg)
	}
	return code
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// warn prints one line "execbox: ..." on stderr.
func (s *stdio) warn(format string, args ...any) {
	fmt.Fprintf(s.err, "execbox: "+format+"\n", args...)
}

// leaves lists the problems in err, one a line (config.Leaves).
func leaves(err error) []error { return config.Leaves(err) }

// newFlagSet returns a silent FlagSet for c: parse reports its errors.
func newFlagSet(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet("execbox "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args into fs. If it returns done, the caller returns code:
// 0 after printing help for -h, ExitUsage after a bad flag.
func (s *stdio) parse(c *command, fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		printCommandUsage(s.out, c, fs)
		return 0, true
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		msg = "unknown flag --" + name
	} else if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		msg = "--" + name + ": needs a value"
	}
	return s.fail(ExitUsage, fmt.Errorf("%s: %s (see 'execbox help %s')", c.name, msg, c.name)), true
}

// loadConfig loads the configuration with the flags of fl and checks the
// runtimes' names and settings against the registry. Any problem stops the
// command here, before anything runs, with ExitUsage: a configuration
// error never becomes a fallback to less isolation.
func (s *stdio) loadConfig(fl *config.Flags) (*config.Config, int, bool) {
	cfg, err := config.Load(config.LoadOptions{Flags: fl, Registry: execbox.DefaultRegistry})
	if err != nil {
		return nil, s.fail(ExitUsage, err), false
	}
	return cfg, 0, true
}

// interrupted returns the exit code for a Main stopped by ctx: 128+N when
// a signal N cancelled it (as signal.NotifyContext records in the cause),
// else 130, as for Ctrl-C.
func interrupted(ctx context.Context) int {
	cause := context.Cause(ctx)
	if cause == nil {
		return 128 + int(syscall.SIGINT)
	}
	var sigErr interface{ Signal() os.Signal }
	if errors.As(cause, &sigErr) {
		if sig, ok := sigErr.Signal().(syscall.Signal); ok {
			return 128 + int(sig)
		}
	}
	// signal.NotifyContext's cause reads "<signal> signal received".
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		if strings.HasPrefix(cause.Error(), sig.String()+" signal") {
			return 128 + int(sig)
		}
	}
	return 128 + int(syscall.SIGINT)
}

// createSandbox opens the configured runtime and creates a sandbox from
// spec. On failure it reports the error and returns the exit code, with
// ok false; on success the caller must call closeSandbox.
func (s *stdio) createSandbox(ctx context.Context, cfg *config.Config, logger *slog.Logger, spec execbox.Spec) (sb execbox.Sandbox, closeSandbox func(), code int, ok bool) {
	rt, err := cfg.OpenRuntime(ctx, logger, s.err)
	if err != nil {
		return nil, nil, s.fail(errorCode(err), cfg.Annotate(err)), false
	}
	sb, err = rt.Create(ctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, interrupted(ctx), false
		}
		return nil, nil, s.fail(errorCode(err), annotate(cfg, defaultWorkspaceHint(cfg, spec, err))), false
	}
	return sb, func() {
		if err := sb.Close(); err != nil {
			s.warn("close sandbox: %v", err)
		}
	}, 0, true
}

// defaultWorkspaceHint adds to a refusal of the workspace, when it is
// the current directory by default (interactiveWorkspace) rather than
// one the user named, how to run without it: a remote server refuses
// paths on its host, and a system directory is refused everywhere.
func defaultWorkspaceHint(cfg *config.Config, spec execbox.Spec, err error) error {
	if spec.Workspace == "" || cfg.IsSet("workspace") {
		return err
	}
	leaves := leaves(err)
	for i, e := range leaves {
		var fe *execbox.FieldError
		if errors.As(e, &fe) && fe.Field == "workspace" {
			leaves[i] = &execbox.FieldError{Field: fe.Field, Kind: fe.Kind,
				Problem: fe.Problem + "; the workspace is the current directory by default: pass --temp-workspace for a new one"}
		}
	}
	return errors.Join(leaves...)
}

// interactiveWorkspace is the workspace of exec and shell: a new temporary
// one with temp, the configured one if set, else the current directory
// (what people expect of `execbox exec -- ls`).
func interactiveWorkspace(cfg *config.Config, temp bool) (string, error) {
	switch {
	case temp:
		return "", nil
	case cfg.IsSet("workspace"):
		return cfg.Spec().Workspace, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	return dir, nil
}
