package execboxtest

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
)

func testRegistry(t *testing.T, s *suite) {
	name := s.rt.Name()
	if name == "" {
		t.Fatal("Runtime.Name() is empty")
	}
	if !slices.Contains(execbox.Names(), name) {
		t.Errorf("runtime %q is not in execbox.Names() %v: its package should Register it in init", name, execbox.Names())
	}
	_, err := execbox.Open("execbox-no-such-runtime", execbox.Options{})
	wantKind(t, "Open of an unknown runtime", err, execbox.ErrNotFound)
	if !hasField(err, "runtime", execbox.ErrNotFound) {
		t.Errorf("Open of an unknown runtime: %v, want a *FieldError for field %q", err, "runtime")
	}
}

func testExitCodes(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	if sb.ID() == "" {
		t.Error("Sandbox.ID() is empty")
	}
	for _, code := range []int{0, 1, 42, 255} {
		for _, form := range []string{"argv", "shell"} {
			t.Run(fmt.Sprintf("%s/%d", form, code), func(t *testing.T) {
				req := execbox.ExecRequest{Command: sh(fmt.Sprintf("exit %d", code))}
				if form == "shell" {
					req = execbox.ExecRequest{Shell: fmt.Sprintf("exit %d", code)}
				}
				res := mustExec(t, sb, req)
				if res.Reason != execbox.ReasonExited || res.ExitCode != code || res.Signal != 0 {
					t.Errorf("%s: reason %q, exit code %d, signal %v; want %q, %d, 0 (guarantee 1)",
						describe(req), res.Reason, res.ExitCode, res.Signal, execbox.ReasonExited, code)
				}
				if got := res.Success(); got != (code == 0) {
					t.Errorf("Success() = %v for exit code %d", got, code)
				}
				if res.Duration <= 0 {
					t.Errorf("Duration = %v, want > 0", res.Duration)
				}
				if res.Stdout.Total != 0 || res.Stderr.Total != 0 || len(res.Stdout.Data) != 0 || len(res.Stderr.Data) != 0 {
					t.Errorf("unexpected output: stdout %q, stderr %q", res.Stdout.Data, res.Stderr.Data)
				}
			})
		}
	}
	// The argv form involves no shell: metacharacters are plain bytes.
	t.Run("argv/no-interpolation", func(t *testing.T) {
		arg := `$HOME; exit 3 $(false) "'` + "`true`"
		res := mustExec(t, sb, execbox.ExecRequest{Command: []string{"printf", "%s", arg}})
		if !res.Success() || string(res.Stdout.Data) != arg {
			t.Errorf("printf %%s %q: %s, stdout %q; want exited 0 printing the argument verbatim", arg, res.String(), res.Stdout.Data)
		}
	})
	// Bytes that are not UTF-8 reach the command unchanged, or the
	// request is refused naming the field; never silently altered (JSON
	// would turn them into U+FFFD on the remote runtime).
	t.Run("argv/not-utf8", func(t *testing.T) {
		arg := "a\xffb\xc3("
		req := execbox.ExecRequest{Command: sh(`printf %s "$1"; printf %s "$V" >&2`, arg), Env: map[string]string{"V": arg}}
		res, err := sb.Exec(t.Context(), req)
		if err != nil {
			var fe *execbox.FieldError
			if !errors.Is(err, execbox.ErrInvalidArgument) || !errors.As(err, &fe) || !strings.Contains(err.Error(), "UTF-8") {
				t.Fatalf("argv and env not UTF-8: %v; want them unchanged or an invalid_argument naming the field", err)
			}
			return
		}
		if string(res.Stdout.Data) != arg || string(res.Stderr.Data) != arg {
			t.Errorf("argv and env %q: stdout %q, stderr %q; want them unchanged (guarantee 3)", arg, res.Stdout.Data, res.Stderr.Data)
		}
	})
}

func testSignal(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	for _, tc := range []struct {
		sig  string
		want execbox.Signal
	}{
		{"SEGV", execbox.SIGSEGV},
		{"KILL", execbox.SIGKILL},
		{"TERM", execbox.SIGTERM},
		{"ABRT", execbox.SIGABRT},
	} {
		for _, form := range []string{"argv", "shell"} {
			t.Run(form+"/"+tc.sig, func(t *testing.T) {
				line := "kill -" + tc.sig + " $$"
				req := execbox.ExecRequest{Command: sh(line)}
				if form == "shell" {
					req = execbox.ExecRequest{Shell: line}
				}
				res := mustExec(t, sb, req)
				if res.Reason != execbox.ReasonSignaled || res.Signal != tc.want || res.ExitCode != -1 {
					t.Errorf("%s: reason %q, signal %v, exit code %d; want %q, %v, -1 (guarantee 1)",
						describe(req), res.Reason, res.Signal, res.ExitCode, execbox.ReasonSignaled, tc.want)
				}
				if got, want := res.ShellExitCode(), 128+int(tc.want); got != want {
					t.Errorf("ShellExitCode() = %d, want %d", got, want)
				}
			})
		}
	}
}

func testCommandNotFound(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	shOK(t, sb, "mkdir -p dir && echo data > notexec.txt")
	for _, prog := range []string{
		"execbox-no-such-program-" + token(),
		"./execbox-no-such-program",
		"/nonexistent-" + token() + "/bin/prog",
	} {
		t.Run("exec/"+prog, func(t *testing.T) {
			_, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{prog, "arg"}})
			wantKind(t, "Exec of a missing program", err, execbox.ErrNotFound)
			if err != nil && !strings.Contains(err.Error(), path.Base(prog)) {
				t.Errorf("Exec of a missing program: error %q does not name the program %q", err, prog)
			}
		})
	}
	t.Run("start", func(t *testing.T) {
		prog := "execbox-no-such-program-" + token()
		p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: []string{prog}})
		if err == nil {
			res, _ := p.Wait(t.Context())
			t.Fatalf("Start of a missing program succeeded (result %s), want ErrNotFound", res.String())
		}
		wantKind(t, "Start of a missing program", err, execbox.ErrNotFound)
	})
	t.Run("shell", func(t *testing.T) {
		prog := "execbox-no-such-program-" + token()
		res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: prog + " arg"})
		if err != nil {
			t.Fatalf("shell form: Exec: %v, want a Result (the shell ran)", err)
		}
		if res.Reason != execbox.ReasonExited || res.ExitCode != 127 {
			t.Errorf("shell form: %s, want exited 127", res.String())
		}
		if !strings.Contains(res.Stderr.Text(), prog) {
			t.Errorf("shell form: stderr %q does not name %q", res.Stderr.Text(), prog)
		}
	})
	t.Run("shell/not-executable", func(t *testing.T) {
		res := mustExec(t, sb, execbox.ExecRequest{Shell: "./notexec.txt"})
		if res.Reason != execbox.ReasonExited || res.ExitCode != 126 {
			t.Errorf("shell form, a file without x permission: %s, want exited 126", res.String())
		}
	})
	t.Run("exec/not-executable", func(t *testing.T) {
		for _, prog := range []string{"./notexec.txt", "./dir"} {
			_, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{prog}})
			if err == nil {
				t.Errorf("Exec of %s (not executable): nil error, want one", prog)
			} else if errors.Is(err, execbox.ErrInvalidArgument) || errors.Is(err, execbox.ErrUnavailable) {
				t.Errorf("Exec of %s (not executable): %v; want ErrPermission or ErrNotFound", prog, err)
			}
		}
	})
}

func testTimeout(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	const short = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		req  execbox.ExecRequest
		out  string
		// timeout is the command's; partial-output's leaves its shell
		// (bash, slower to start than sh) time to print under a loaded
		// machine, since what it tests is that output before the
		// timeout is kept.
		timeout time.Duration
	}{
		{"argv", execbox.ExecRequest{Command: []string{"sleep", "100"}}, "", short},
		{"partial-output", execbox.ExecRequest{Shell: "echo before; sleep 100; echo after"}, "before\n", 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			timeout := tc.timeout
			req := tc.req
			req.Timeout = timeout
			start := time.Now()
			res, err := sb.Exec(t.Context(), req)
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("Exec: %v, want a nil error: a timeout is a result", err)
			}
			if res.Reason != execbox.ReasonTimedOut || !res.TimedOut() {
				t.Errorf("Reason = %q (%s), want %q", res.Reason, res.String(), execbox.ReasonTimedOut)
			}
			if req.Command != nil && res.ExitCode != -1 {
				t.Errorf("ExitCode = %d, want -1 for a sleep killed by SIGTERM", res.ExitCode)
			}
			if got := res.ShellExitCode(); got != 124 {
				t.Errorf("ShellExitCode() = %d, want 124", got)
			}
			if got := string(res.Stdout.Data); got != tc.out {
				t.Errorf("Stdout = %q, want %q", got, tc.out)
			}
			if elapsed < timeout || res.Duration < timeout {
				t.Errorf("returned after %v (Duration %v), before the %v timeout", elapsed, res.Duration, timeout)
			}
			if elapsed > timeout+s.slack {
				t.Errorf("returned after %v, want within %v of the %v timeout", elapsed, s.slack, timeout)
			}
		})
	}
	t.Run("start", func(t *testing.T) {
		t.Parallel()
		p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: []string{"sleep", "100"}, Timeout: short})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		res, err := p.Wait(ctxTimeout(t, short+s.slack))
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if res.Reason != execbox.ReasonTimedOut {
			t.Errorf("Reason = %q, want %q", res.Reason, execbox.ReasonTimedOut)
		}
	})
	t.Run("not-reached", func(t *testing.T) {
		t.Parallel()
		res := mustExec(t, sb, execbox.ExecRequest{Command: []string{"sleep", "0.1"}, Timeout: 10 * time.Second})
		if !res.Success() {
			t.Errorf("sleep 0.1 with a 10s timeout: %s, want exited 0", res.String())
		}
	})
}
