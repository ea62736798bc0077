package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/config"
	"golang.org/x/term"
)

var shellCommand = &command{
	name:    "shell",
	summary: "attach this terminal to a shell in a sandbox",
	args:    "[flags] [--] [PROGRAM [ARG...]]",
	help: `Shell opens a terminal (PTY) session in a sandbox, running PROGRAM (default
bash --norc --noprofile -i, with the prompt execbox:DIR$ and no history
file), and attaches execbox's own terminal to it in raw mode: keys go to
the program as typed (Ctrl-C included), what it prints comes back as is,
and window size changes follow. execbox exits with the program's exit code
(128+N if signal N killed it) once it ends.

The workspace is the current directory unless --workspace,
$EXECBOX_WORKSPACE or the config's workspace names another, or
--temp-workspace asks for a new temporary one, removed afterwards (/, a
system directory or root's home only with --allow-system-workspace). The
environment is the sandbox's (clean by default) plus TERM and COLORTERM
from execbox's own, and --env.

When standard input is not a terminal, it is copied to the program as is,
followed by Ctrl-D (end of input at a prompt) at its end.`,
	run: runShell,
}

// defaultShell is the program without one given: bash reading no
// startup file, neither the host's (/etc/bash.bashrc sets a prompt with
// the host's user and host name) nor the workspace's (HOME is the
// workspace, the user's own directory on the local runtime).
var defaultShell = []string{"bash", "--norc", "--noprofile", "-i"}

// defaultShellEnv is what defaultShell gets unless --env sets it: a
// prompt of execbox's own, and no history file (bash would write
// ~/.bash_history into the workspace). History within the session works.
var defaultShellEnv = map[string]string{"PS1": `execbox:\w\$ `, "HISTFILE": ""}

func runShell(ctx context.Context, c *command, s *stdio, args []string) int {
	fs := newFlagSet(c)
	var cf config.Flags
	cf.Register(fs, sandboxKeys...)
	pf := registerPlaceFlags(fs, "program")
	if code, done := s.parse(c, fs, args); done {
		return code
	}
	env, err := pf.check(fs, "shell")
	if err != nil {
		return s.fail(ExitUsage, err)
	}
	if env == nil {
		env = map[string]string{}
	}
	argv := fs.Args()
	if len(argv) == 0 {
		argv = defaultShell
		for k, v := range defaultShellEnv {
			if _, set := env[k]; !set {
				env[k] = v
			}
		}
	}
	for _, k := range []string{"TERM", "COLORTERM"} {
		if v, ok := os.LookupEnv(k); ok && v != "" {
			if _, set := env[k]; !set {
				env[k] = v
			}
		}
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
	in, _ := s.in.(*os.File)
	out, _ := s.out.(*os.File)
	tty := in != nil && term.IsTerminal(int(in.Fd()))
	opts := execbox.SessionOptions{
		Kind:        execbox.SessionPTY,
		Command:     argv,
		Dir:         *pf.workdir,
		Env:         env,
		GracePeriod: cfg.Exec.GracePeriod,
		// Every byte the program writes is shown: a slow stdout slows
		// it, as a terminal would.
		FlowControl: true,
	}
	if rows, cols, ok := termSize(in, out); ok {
		opts.Rows, opts.Cols = rows, cols
	}
	if err := errors.Join(spec.Validate(), opts.Validate()); err != nil {
		return s.fail(ExitUsage, annotate(cfg, err))
	}

	sb, closeSandbox, status, ok := s.createSandbox(ctx, cfg, logger, spec)
	if !ok {
		return status
	}
	defer closeSandbox()
	sess, err := execbox.OpenSession(ctx, sb, opts)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx)
		}
		return s.fail(startErrorCode(err), annotate(cfg, err))
	}
	defer sess.Close()

	if tty {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return s.fail(ExitFailure, fmt.Errorf("terminal: %w", err))
		}
		defer term.Restore(int(in.Fd()), old)
	}
	sessCtx, stop := context.WithCancel(ctx)
	defer stop()
	go forwardInput(sessCtx, sess, s.in, tty)
	if tty || out != nil {
		go forwardResize(sessCtx, sess, in, out)
	}

	var res *execbox.Result
	for ev, err := range sess.Events(ctx, 1) {
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return s.fail(ExitFailure, err)
		}
		switch ev.Kind {
		case execbox.EventStdout, execbox.EventStderr:
			if _, err := s.out.Write(ev.Data); err != nil {
				return s.fail(ExitFailure, fmt.Errorf("stdout: %w", err))
			}
		case execbox.EventDropped:
			// Not with flow control; an older server could: loudly.
			return s.fail(ExitFailure, fmt.Errorf("shell: %d bytes of output were lost before they could be shown", ev.Dropped))
		case execbox.EventExit:
			res = ev.Result
		}
	}
	if ctx.Err() != nil {
		return interrupted(ctx)
	}
	if res == nil {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := sess.Wait(wctx)
		if err != nil {
			return s.fail(ExitFailure, err)
		}
		res = &r
	}
	return res.ShellExitCode()
}

// termSize returns the size of the terminal of in or out, if either is one.
func termSize(in, out *os.File) (rows, cols int, ok bool) {
	for _, f := range []*os.File{out, in} {
		if f == nil {
			continue
		}
		if w, h, err := term.GetSize(int(f.Fd())); err == nil && w > 0 && h > 0 {
			return h, w, true
		}
	}
	return 0, 0, false
}

// forwardInput copies in to the session until ctx ends or in fails. Input
// that is not a terminal ends with Ctrl-D, which a program reading its
// terminal in canonical mode (a shell at its prompt) takes as end of file.
// A Read blocked when ctx ends is left to return on its own.
func forwardInput(ctx context.Context, sess execbox.Session, in io.Reader, tty bool) {
	if in == nil {
		return
	}
	buf := make([]byte, 32<<10)
	for ctx.Err() == nil {
		n, err := in.Read(buf)
		if n > 0 && ctx.Err() == nil {
			if _, werr := sess.Write(ctx, buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !tty && ctx.Err() == nil {
				sess.Write(ctx, []byte{4})
			}
			return
		}
	}
}

// forwardResize passes the terminal's size to the session at every
// SIGWINCH, until ctx ends.
func forwardResize(ctx context.Context, sess execbox.Session, in, out *os.File) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			if rows, cols, ok := termSize(in, out); ok {
				_ = sess.Resize(ctx, rows, cols)
			}
		}
	}
}
