package execboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
)

// RunSessions runs the session suite against cfg.Runtime, whose sandboxes
// must implement execbox.SessionOpener: bash, Python and PTY sessions,
// their state, framing, timeouts, concurrency, and that closing a session
// or its sandbox leaves no process behind (checked from the host as Run
// checks commands: every interpreter carries a mark, found in the host's
// /proc when the runtime's processes are visible there). It needs bash
// and python3 in the sandbox (and skips what needs one that this machine
// lacks, through testutil.Require).
//
// It is separate from Run so that a runtime opts in once its sandboxes
// have sessions.
func RunSessions(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.Runtime == nil {
		t.Fatal("execboxtest: Config.Runtime is nil")
	}
	if h := cfg.Runtime.Health(t.Context()); !h.Available {
		t.Fatalf("execboxtest: runtime %q is not available: %s", cfg.Runtime.Name(), h.Detail)
	}
	s := &suite{cfg: cfg, rt: cfg.Runtime, caps: cfg.Runtime.Capabilities(), slack: testutil.Scale(cfg.Slack)}
	if s.slack <= 0 {
		s.slack = 2 * time.Second
	}
	for _, tc := range sessionTests {
		if need := needs[tc.name]; need != nil && !need(s.caps) {
			continue // not claimed: see claimed
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, s)
		})
	}
}

var sessionTests = []struct {
	name string
	fn   func(*testing.T, *suite)
}{
	{"BadOptions", testSessionBadOptions},
	{"Unsupported", testSessionUnsupported},
	{"List", testSessionList},
	{"BashState", testBashState},
	{"BashOutput", testBashOutput},
	{"BashFraming", testBashFraming},
	{"BashStdin", testBashStdin},
	{"BashTimeout", testBashTimeout},
	{"BashTimeoutIgnoringINT", testBashTimeoutIgnoringINT},
	{"BashTimeoutInShellItself", testBashTimeoutInShell},
	{"BashContextCancel", testBashContextCancel},
	{"BashExit", testBashExit},
	{"BashBackgroundJobs", testBashBackground},
	{"BashHugeOutput", testBashHugeOutput},
	{"BashConcurrentRuns", testBashConcurrent},
	{"BashUser", testBashUser},
	{"BashPrivateDirSymlink", testBashPrivateDirSymlink},
	{"BashLimits", testBashLimits},
	{"PythonState", testPythonState},
	{"PythonOutput", testPythonOutput},
	{"PythonExceptions", testPythonExceptions},
	{"PythonTimeout", testPythonTimeout},
	{"PythonExit", testPythonExit},
	{"PythonFraming", testPythonFraming},
	{"PTY", testPTY},
	{"PTYExit", testPTYExit},
	{"CloseDuringRun", testSessionCloseDuringRun},
	{"SandboxCloseClosesSessions", testSandboxCloseClosesSessions},
}

var (
	needBash   = testutil.Command("bash")
	needPython = testutil.Command("python3")
)

// openSession opens a session in sb with opts plus a conformance mark, and
// closes it when t ends, checking that nothing marked survives.
func (s *suite) openSession(t *testing.T, sb execbox.Sandbox, opts execbox.SessionOptions) (execbox.Session, string) {
	t.Helper()
	mark, env := newMark()
	if opts.Env == nil {
		opts.Env = map[string]string{}
	}
	for k, v := range env {
		opts.Env[k] = v
	}
	sess, err := execbox.OpenSession(ctxTimeout(t, 30*time.Second), sb, opts)
	if err != nil {
		t.Fatalf("OpenSession %s: %v", opts.Kind, err)
	}
	// The interpreter carries the mark: the host sees it now if it can
	// see the runtime's processes at all (as Run's checks do).
	w := s.watchHost(t, mark)
	t.Cleanup(func() {
		if err := sess.Close(); err != nil {
			t.Errorf("session Close: %v", err)
		}
		w.waitGone(t, s.killWithin(), "the session's Close")
	})
	return sess, mark
}

// newSession creates a sandbox and opens a session of kind in it.
func (s *suite) newSession(t *testing.T, kind execbox.SessionKind, mod func(*execbox.SessionOptions)) (execbox.Session, execbox.Sandbox) {
	t.Helper()
	switch kind {
	case execbox.SessionPython:
		testutil.Require(t, needPython)
	default:
		testutil.Require(t, needBash)
	}
	sb := s.create(t, nil)
	opts := execbox.SessionOptions{Kind: kind}
	if mod != nil {
		mod(&opts)
	}
	sess, _ := s.openSession(t, sb, opts)
	return sess, sb
}

// run runs code and fails t on an error.
func run(t *testing.T, sess execbox.Session, req execbox.SessionRequest) execbox.SessionResult {
	t.Helper()
	ctx := ctxTimeout(t, req.Timeout+60*time.Second)
	res, err := sess.Run(ctx, req)
	if err != nil {
		t.Fatalf("Run %q: %v", req.Code, err)
	}
	return res
}

// runOK runs code, requires success and returns stdout.
func runOK(t *testing.T, sess execbox.Session, code string) string {
	t.Helper()
	res := run(t, sess, execbox.SessionRequest{Code: code})
	if !res.Success() {
		t.Fatalf("Run %q: %s exit %d, exception %v; stdout %q, stderr %q", code, res.Reason, res.ExitCode, res.Exception, res.Stdout.Text(), res.Stderr.Text())
	}
	return string(res.Stdout.Data)
}

// waitFile polls until the workspace of sb has a file at name, which
// a command makes to say it has reached some point.
func waitFile(t *testing.T, sb execbox.Sandbox, name, what string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() bool {
		_, err := sb.Files().Stat(t.Context(), name)
		return err == nil
	}, what)
}

func wantOut(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s: stdout %q, want %q", what, got, want)
	}
}

func testSessionBadOptions(t *testing.T, s *suite) {
	testutil.Require(t, needBash)
	sb := s.create(t, nil)
	for _, tc := range []struct {
		opts  execbox.SessionOptions
		field string
		kind  error
	}{
		{execbox.SessionOptions{}, "kind", execbox.ErrInvalidArgument},
		{execbox.SessionOptions{Kind: "fish"}, "kind", execbox.ErrInvalidArgument},
		{execbox.SessionOptions{Kind: execbox.SessionBash, Command: []string{"bash", "-x"}}, "command", execbox.ErrInvalidArgument},
		{execbox.SessionOptions{Kind: execbox.SessionBash, Dir: "../.."}, "dir", execbox.ErrPermission},
		{execbox.SessionOptions{Kind: execbox.SessionBash, Env: map[string]string{"A=B": "c"}}, "env.A=B", execbox.ErrInvalidArgument},
		{execbox.SessionOptions{Kind: execbox.SessionBash, GracePeriod: -1}, "grace_period", execbox.ErrInvalidArgument},
		{execbox.SessionOptions{Kind: execbox.SessionPTY, Rows: -1}, "rows", execbox.ErrInvalidArgument},
		{execbox.SessionOptions{Kind: execbox.SessionBash, Command: []string{"execbox-no-such-shell"}}, "command[0]", execbox.ErrNotFound},
	} {
		_, err := execbox.OpenSession(t.Context(), sb, tc.opts)
		if !hasField(err, tc.field, tc.kind) {
			t.Errorf("OpenSession(%+v): error %v, want a field error on %s matching %v", tc.opts, err, tc.field, tc.kind)
		}
	}
	sess, _ := s.openSession(t, sb, execbox.SessionOptions{Kind: execbox.SessionBash})
	for _, tc := range []struct {
		req   execbox.SessionRequest
		field string
	}{
		{execbox.SessionRequest{Code: "echo \x00"}, "code"},
		{execbox.SessionRequest{Code: "true", Timeout: -1}, "timeout"},
		{execbox.SessionRequest{Code: "true", OutputLimit: -1}, "output_limit"},
	} {
		_, err := sess.Run(t.Context(), tc.req)
		if !hasField(err, tc.field, execbox.ErrInvalidArgument) {
			t.Errorf("Run(%+v): error %v, want a field error on %s", tc.req, err, tc.field)
		}
	}
	wantOut(t, "after bad requests", runOK(t, sess, "echo ok"), "ok\n")
}

func testSessionUnsupported(t *testing.T, s *suite) {
	bash, _ := s.newSession(t, execbox.SessionBash, nil)
	if _, err := bash.Write(t.Context(), []byte("x")); !errors.Is(err, execbox.ErrUnsupported) {
		t.Errorf("Write on a bash session: %v, want ErrUnsupported", err)
	}
	if err := bash.Resize(t.Context(), 10, 10); !errors.Is(err, execbox.ErrUnsupported) {
		t.Errorf("Resize on a bash session: %v, want ErrUnsupported", err)
	}
	for _, err := range bash.Events(t.Context(), 1) {
		if !errors.Is(err, execbox.ErrUnsupported) {
			t.Errorf("Events on a bash session: %v, want ErrUnsupported", err)
		}
	}
	pty, _ := s.newSession(t, execbox.SessionPTY, nil)
	if _, err := pty.Run(t.Context(), execbox.SessionRequest{Code: "true"}); !errors.Is(err, execbox.ErrUnsupported) {
		t.Errorf("Run on a pty session: %v, want ErrUnsupported", err)
	}
}

func testSessionList(t *testing.T, s *suite) {
	testutil.Require(t, needBash)
	sb := s.create(t, nil)
	so := sb.(execbox.SessionOpener)
	a, _ := s.openSession(t, sb, execbox.SessionOptions{Kind: execbox.SessionBash})
	b, _ := s.openSession(t, sb, execbox.SessionOptions{Kind: execbox.SessionPTY})
	list, err := so.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != a.ID() || list[1].ID != b.ID() || list[0].Kind != execbox.SessionBash || list[1].Kind != execbox.SessionPTY {
		t.Fatalf("Sessions: %+v, want %s (bash) and %s (pty)", list, a.ID(), b.ID())
	}
	if a.ID() == b.ID() {
		t.Errorf("two sessions share ID %s", a.ID())
	}
	got, err := so.Session(t.Context(), a.ID())
	if err != nil || got.ID() != a.ID() {
		t.Errorf("Session(%s): %v, %v", a.ID(), got, err)
	}
	if _, err := so.Session(t.Context(), "s-none"); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("Session of an unknown ID: %v, want ErrNotFound", err)
	}
	b.Close()
	list, _ = so.Sessions(t.Context())
	if len(list) != 1 || list[0].ID != a.ID() {
		t.Errorf("Sessions after closing %s: %+v, want only %s", b.ID(), list, a.ID())
	}
	if _, err := so.Session(t.Context(), b.ID()); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("Session of a closed session: %v, want ErrNotFound", err)
	}
}

func testBashState(t *testing.T, s *suite) {
	sess, sb := s.newSession(t, execbox.SessionBash, nil)
	runOK(t, sess, "mkdir -p sub/dir && cd sub")
	runOK(t, sess, "export EXPORTED=e1; plain=p1; declare -A map=([k]=v); declare -i n=41")
	runOK(t, sess, "greet() { echo \"hello $1\"; }\nalias ll='echo aliased'")
	runOK(t, sess, "set -o pipefail; shopt -s nullglob; n+=1")
	wantOut(t, "cwd", runOK(t, sess, "pwd"), sb.Workspace()+"/sub\n")
	wantOut(t, "variables", runOK(t, sess, `echo "$EXPORTED $plain ${map[k]} $n"; sh -c 'echo "$EXPORTED"'`), "e1 p1 v 42\ne1\n")
	wantOut(t, "function and alias", runOK(t, sess, "greet you\nll"), "hello you\naliased\n")
	wantOut(t, "options", runOK(t, sess, "false | true; echo $?; echo nomatch*"), "1\n\n")
	// $? carries over from one command to the next, as at a prompt.
	run(t, sess, execbox.SessionRequest{Code: "(exit 7)"})
	wantOut(t, "$? of the previous command", runOK(t, sess, "echo $?"), "7\n")
	wantOut(t, "relative path", runOK(t, sess, "cd dir && pwd"), sb.Workspace()+"/sub/dir\n")
}

func testBashOutput(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionBash, nil)
	res := run(t, sess, execbox.SessionRequest{Code: "echo out; echo err >&2; printf 'a\\377b'; exit_with() { return $1; }; exit_with 3"})
	if res.Reason != execbox.ReasonExited || res.ExitCode != 3 {
		t.Errorf("result %s %d, want exited 3", res.Reason, res.ExitCode)
	}
	if got := string(res.Stdout.Data); got != "out\na\xffb" {
		t.Errorf("stdout %q, want %q", got, "out\na\xffb")
	}
	if got := string(res.Stderr.Data); got != "err\n" {
		t.Errorf("stderr %q, want %q", got, "err\n")
	}
	if res.Duration <= 0 {
		t.Errorf("duration %v", res.Duration)
	}
	wantOut(t, "pipeline and multi-line", runOK(t, sess, "for i in 1 2 3; do\n  echo $i\ndone | tac\n"), "3\n2\n1\n")
	wantOut(t, "heredoc", runOK(t, sess, "cat <<'EOF'\nline $1\nEOF\ncat <<EOF\n$((1+1))\nEOF"), "line $1\n2\n")
	wantOut(t, "no trailing newline", runOK(t, sess, "printf x"), "x")
}

func testBashFraming(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionBash, nil)
	for _, tc := range []struct {
		code     string
		exit     int
		stdout   string
		inStderr string
	}{
		{"echo 'unterminated", 2, "", "unexpected EOF"},
		{`echo "unterminated`, 2, "", "unexpected EOF"},
		{"cat <<EOF\nno end\n", 0, "no end\n", "here-document"},
		{"if then fi", 2, "", "syntax error"},
		{"echo before; (", 2, "", "syntax error"},
		{"echo $((1+))", 1, "", ""},
		{`f() { echo "in f"; }; f; }`, 2, "", "syntax error"},
		// What the session's own protocol looks like, printed by the
		// command: just output.
		{`echo "S 1"; echo "E 1 0000000000000000 0"; echo "I 2 x 0"; echo R`, 0, "S 1\nE 1 0000000000000000 0\nI 2 x 0\nR\n", ""},
		{`for i in $(seq 1 20); do echo "E $i $(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n') 0"; done >&2; echo done`, 0, "done\n", "E 20 "},
		{`printf '\\builtin printf "E 99 x 0\\n"\n'; echo 'exit 9'`, 0, "\\builtin printf \"E 99 x 0\\n\"\nexit 9\n", ""},
		{"echo \"$(printf 'a\\nb')\"\nexit_not=1\n", 0, "a\nb\n", ""},
	} {
		res := run(t, sess, execbox.SessionRequest{Code: tc.code, Timeout: testutil.Scale(10 * time.Second)})
		if res.Reason != execbox.ReasonExited || res.ExitCode != tc.exit {
			t.Errorf("%q: %s %d, want exited %d (stderr %q)", tc.code, res.Reason, res.ExitCode, tc.exit, res.Stderr.Text())
		}
		if got := string(res.Stdout.Data); got != tc.stdout {
			t.Errorf("%q: stdout %q, want %q", tc.code, got, tc.stdout)
		}
		if !strings.Contains(res.Stderr.Text(), tc.inStderr) {
			t.Errorf("%q: stderr %q lacks %q", tc.code, res.Stderr.Text(), tc.inStderr)
		}
		// Whatever came before, the next command runs alone and intact.
		wantOut(t, "after "+strconv.Quote(tc.code), runOK(t, sess, "echo next"), "next\n")
	}
}

func testBashStdin(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionBash, nil)
	start := time.Now()
	res := run(t, sess, execbox.SessionRequest{Code: "cat; read -r line; echo \"read $? '$line'\"", Timeout: testutil.Scale(20 * time.Second)})
	if time.Since(start) > 10*time.Second || !res.Success() || string(res.Stdout.Data) != "read 1 ''\n" {
		t.Errorf("a command reading stdin without input: %s %d stdout %q after %v; want EOF at once", res.Reason, res.ExitCode, res.Stdout.Text(), time.Since(start))
	}
	res = run(t, sess, execbox.SessionRequest{Code: "tr a-z A-Z", Stdin: strings.NewReader("hello\nworld\n")})
	if !res.Success() || string(res.Stdout.Data) != "HELLO\nWORLD\n" {
		t.Errorf("with stdin: %s %d stdout %q", res.Reason, res.ExitCode, res.Stdout.Text())
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: more than a pipe holds
	res = run(t, sess, execbox.SessionRequest{Code: "wc -c", Stdin: bytes.NewReader(big)})
	if strings.TrimSpace(string(res.Stdout.Data)) != strconv.Itoa(len(big)) {
		t.Errorf("1 MiB of stdin: stdout %q", res.Stdout.Text())
	}
	// Stdin a command does not read does not hold the session up.
	res = run(t, sess, execbox.SessionRequest{Code: "echo ignored", Stdin: bytes.NewReader(big), Timeout: testutil.Scale(10 * time.Second)})
	if !res.Success() || string(res.Stdout.Data) != "ignored\n" {
		t.Errorf("unread stdin: %s %d stdout %q", res.Reason, res.ExitCode, res.Stdout.Text())
	}
	wantOut(t, "after", runOK(t, sess, "echo next"), "next\n")
}

// timedRun runs code with timeout and checks that it timed out within
// the timeout plus the grace period and slack.
func (s *suite) timedRun(t *testing.T, sess execbox.Session, code string, timeout, grace time.Duration) execbox.SessionResult {
	t.Helper()
	start := time.Now()
	res, err := sess.Run(ctxTimeout(t, timeout+grace+60*time.Second), execbox.SessionRequest{Code: code, Timeout: timeout})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Run %q: %v", code, err)
	}
	if res.Reason != execbox.ReasonTimedOut {
		t.Errorf("Run %q: %s %d, want timed_out", code, res.Reason, res.ExitCode)
	}
	if took < timeout || took > timeout+grace+s.slack {
		t.Errorf("Run %q took %v, want between %v and %v", code, took, timeout, timeout+grace+s.slack)
	}
	return res
}

func testBashTimeout(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionBash, func(o *execbox.SessionOptions) { o.GracePeriod = 5 * time.Second })
	runOK(t, sess, "x=kept; cd /")
	for _, code := range []string{
		"sleep 100",
		"echo partial; sleep 100; echo after",
		"while :; do :; done; echo after",
		"for i in 1 2 3; do sleep 100; done; echo after",
		"sleep 100 | cat; echo after",
		"read -r x < /dev/tty; echo after", // waits on the terminal
	} {
		// The grace period is long: SIGINT alone must stop these.
		res := s.timedRun(t, sess, code, 300*time.Millisecond, 0)
		if strings.Contains(res.Stdout.Text(), "after") {
			t.Errorf("%q: the command line went on after the interrupt: stdout %q", code, res.Stdout.Text())
		}
		if strings.HasPrefix(code, "echo partial") && res.Stdout.Text() != "partial\n" {
			t.Errorf("%q: stdout %q, want the output before the interrupt", code, res.Stdout.Text())
		}
		if res.ExitCode != 130 {
			t.Errorf("%q: exit code %d, want 130 (interrupted)", code, res.ExitCode)
		}
		wantOut(t, "after "+strconv.Quote(code), runOK(t, sess, "echo $x; pwd"), "kept\n/\n")
	}
}

func testBashTimeoutIgnoringINT(t *testing.T, s *suite) {
	const grace = 500 * time.Millisecond
	sess, _ := s.newSession(t, execbox.SessionBash, func(o *execbox.SessionOptions) { o.GracePeriod = grace })
	runOK(t, sess, "x=kept")
	// A job that ignores SIGINT is killed after the grace period; the
	// shell itself is not.
	res := s.timedRun(t, sess, "sh -c 'trap \"\" INT; sleep 100'; echo after", 300*time.Millisecond, grace)
	if strings.Contains(res.Stdout.Text(), "after") {
		t.Errorf("the command line went on: stdout %q", res.Stdout.Text())
	}
	wantOut(t, "after the kill", runOK(t, sess, "echo $x"), "kept\n")
}

func testBashTimeoutInShell(t *testing.T, s *suite) {
	const grace = 300 * time.Millisecond
	sess, _ := s.newSession(t, execbox.SessionBash, func(o *execbox.SessionOptions) { o.GracePeriod = grace })
	// The shell itself ignores SIGINT and loops: only killing the
	// session stops it.
	start := time.Now()
	res, err := sess.Run(ctxTimeout(t, time.Minute), execbox.SessionRequest{Code: "trap '' INT; while :; do :; done", Timeout: 300 * time.Millisecond})
	if !errors.Is(err, execbox.ErrClosed) || res.Reason != execbox.ReasonTimedOut {
		t.Fatalf("Run: %s, %v; want timed_out and an error matching ErrClosed", res.Reason, err)
	}
	if took := time.Since(start); took > 300*time.Millisecond+2*grace+s.slack {
		t.Errorf("took %v", took)
	}
	if _, err := sess.Run(t.Context(), execbox.SessionRequest{Code: "true"}); !errors.Is(err, execbox.ErrClosed) {
		t.Errorf("Run after the session was killed: %v, want ErrClosed", err)
	}
}

func testBashContextCancel(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionBash, nil)
	runOK(t, sess, "x=kept")
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	res, err := sess.Run(ctx, execbox.SessionRequest{Code: "sleep 100"})
	if !errors.Is(err, context.Canceled) || res.Reason != execbox.ReasonKilled {
		t.Errorf("Run with a cancelled ctx: %s, %v; want killed and context.Canceled", res.Reason, err)
	}
	if took := time.Since(start); took > 300*time.Millisecond+s.slack {
		t.Errorf("took %v after the cancel", took-300*time.Millisecond)
	}
	wantOut(t, "after the cancel", runOK(t, sess, "echo $x"), "kept\n")
	// A ctx already done: nothing runs.
	if _, err := sess.Run(ctx, execbox.SessionRequest{Code: "echo no"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a done ctx: %v", err)
	}
}

func testBashExit(t *testing.T, s *suite) {
	sess, sb := s.newSession(t, execbox.SessionBash, nil)
	res, err := sess.Run(t.Context(), execbox.SessionRequest{Code: "echo bye; exit 3"})
	if !errors.Is(err, execbox.ErrClosed) {
		t.Fatalf("exit 3: error %v, want one matching ErrClosed", err)
	}
	if !strings.Contains(err.Error(), "status 3") {
		t.Errorf("error %q does not say the shell exited with status 3", err)
	}
	if res.ExitCode != 3 || string(res.Stdout.Data) != "bye\n" {
		t.Errorf("result: exit %d stdout %q, want 3 and the output before exit", res.ExitCode, res.Stdout.Text())
	}
	for i := range 2 {
		if _, err := sess.Run(t.Context(), execbox.SessionRequest{Code: "true"}); !errors.Is(err, execbox.ErrClosed) || !strings.Contains(err.Error(), "status 3") {
			t.Errorf("Run %d after exit: %v, want ErrClosed saying why", i, err)
		}
	}
	wres, err := sess.Wait(t.Context())
	if err != nil || wres.ExitCode != 3 {
		t.Errorf("Wait: %v, %v; want exit 3", wres.String(), err)
	}
	list, _ := sb.(execbox.SessionOpener).Sessions(t.Context())
	if len(list) != 1 || !list[0].Exited {
		t.Errorf("Sessions: %+v, want the session listed as exited", list)
	}
}

func testBashBackground(t *testing.T, s *suite) {
	testutil.Require(t, needBash)
	sb := s.create(t, nil)
	sess, mark := s.openSession(t, sb, execbox.SessionOptions{Kind: execbox.SessionBash})
	start := time.Now()
	out := runOK(t, sess, "sleep 300 & echo started")
	if took := time.Since(start); took > time.Second {
		t.Errorf("a command starting a background job took %v", took)
	}
	wantOut(t, "start", out, "started\n")
	if out := runOK(t, sess, "jobs"); !strings.Contains(out, "sleep 300") {
		t.Errorf("jobs: %q, want the background sleep", out)
	}
	// A job writing after its command returned: its output is no later
	// command's.
	runOK(t, sess, "(sleep 0.3; w=LATE; echo $w-out; echo $w-err >&2) &")
	res := run(t, sess, execbox.SessionRequest{Code: "sleep 0.6; echo mine"})
	// (bash may report the job's end on this command's stderr, as it
	// would on a terminal: "[1]+ Done ...". That is bash's, not the job's.)
	if string(res.Stdout.Data) != "mine\n" || strings.Contains(res.Stderr.Text(), "LATE-") {
		t.Errorf("stdout %q stderr %q, want only the command's own", res.Stdout.Text(), res.Stderr.Text())
	}
	// A chatty background job neither blocks nor leaks into results.
	runOK(t, sess, "yes background &")
	for range 3 {
		wantOut(t, "beside a chatty job", runOK(t, sess, "echo quiet"), "quiet\n")
	}
	w := s.watchHost(t, mark)
	sess.Close()
	w.waitGone(t, s.killWithin(), "Close of a session with background jobs")
}

func testBashHugeOutput(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionBash, nil)
	const limit = 1 << 20
	res := run(t, sess, execbox.SessionRequest{Code: "head -c 64000000 /dev/zero; echo end >&2", OutputLimit: limit, Timeout: time.Minute})
	if !res.Success() || res.Stdout.Total != 64000000 || !res.Stdout.Truncated() || len(res.Stdout.Data) > limit {
		t.Errorf("64 MB of stdout under a 1 MiB limit: %s %d, total %d, kept %d, truncated %v", res.Reason, res.ExitCode, res.Stdout.Total, len(res.Stdout.Data), res.Stdout.Truncated())
	}
	if string(res.Stderr.Data) != "end\n" {
		t.Errorf("stderr %q", res.Stderr.Text())
	}
	wantOut(t, "after", runOK(t, sess, "echo next"), "next\n")
}

func testBashConcurrent(t *testing.T, s *suite) {
	sess, sb := s.newSession(t, execbox.SessionBash, nil)
	runOK(t, sess, "n=0")
	// Runs on one session are serialised, each in its entirety: every
	// one sees the state the previous one left.
	const workers = 8
	var wg sync.WaitGroup
	outs := make([]string, workers)
	for i := range workers {
		wg.Go(func() {
			res, err := sess.Run(ctxTimeout(t, time.Minute), execbox.SessionRequest{Code: "v=$n; sleep 0.05; n=$((v+1)); echo $n"})
			if err != nil || !res.Success() {
				t.Errorf("worker %d: %v %s", i, err, res.Reason)
			}
			outs[i] = strings.TrimSpace(string(res.Stdout.Data))
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, o := range outs {
		seen[o] = true
	}
	for i := 1; i <= workers; i++ {
		if !seen[strconv.Itoa(i)] {
			t.Errorf("outputs %q: want each of 1..%d once (serialised)", outs, workers)
			break
		}
	}
	wantOut(t, "total", runOK(t, sess, "echo $n"), fmt.Sprintf("%d\n", workers))
	// A queued Run gives up when its ctx ends: it waits behind one that
	// has started (it made its file) and sleeps.
	go sess.Run(ctxTimeout(t, time.Minute), execbox.SessionRequest{Code: "touch holder; sleep 2"})
	waitFile(t, sb, "holder", "the first Run to start")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := sess.Run(ctx, execbox.SessionRequest{Code: "echo queued"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a queued Run whose ctx ends: %v, want DeadlineExceeded", err)
	}
}

func testBashUser(t *testing.T, s *suite) {
	testutil.Require(t, needBash, needPython)
	sb := s.create(t, func(sp *execbox.Spec) { sp.User = &execbox.User{UID: 65534, GID: 65534} })
	bash, _ := s.openSession(t, sb, execbox.SessionOptions{Kind: execbox.SessionBash})
	wantOut(t, "bash as nobody", runOK(t, bash, "id -u; id -g"), "65534\n65534\n")
	// An interpreter the user can run (a python3 installed under root's
	// home, as pyenv does, cannot be).
	python := []string{"python3"}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		python = []string{"/usr/bin/python3"}
	}
	py, _ := s.openSession(t, sb, execbox.SessionOptions{Kind: execbox.SessionPython, Command: python})
	res := run(t, py, execbox.SessionRequest{Code: "import os; print(os.getuid())\n6*7"})
	if !res.Success() || string(res.Stdout.Data) != "65534\n" || res.Value != "42" {
		t.Errorf("python as nobody: %+v %q", res.Exception, res.Stdout.Text())
	}
}

// testBashPrivateDirSymlink is the confused deputy of the bash session's
// private directory (issue 11): the directory belongs to the command
// user, and the runtime's agent, more privileged, writes each command's
// text to the file c there. A command replaces c with a symlink to a file
// only root may touch; the next command's text must not land in it.
func testBashPrivateDirSymlink(t *testing.T, s *suite) {
	testutil.Require(t, needBash)
	sb := s.create(t, func(sp *execbox.Spec) { sp.User = &execbox.User{UID: 65534, GID: 65534} })
	// A directory of root's that nobody else may enter: the workspace
	// is the user's, and root inside a sandbox may have no capability to
	// write there.
	root := &execbox.User{UID: 0, GID: 0}
	vault := strings.TrimSpace(execOK(t, sb, execbox.ExecRequest{User: root, Command: []string{"sh", "-c",
		`v=$(mktemp -d) && printf 'top secret\n' >"$v/secret" && chmod 600 "$v/secret" && echo "$v"`}}))
	t.Cleanup(func() {
		// t.Context is done by now.
		if _, err := sb.Exec(context.Background(), execbox.ExecRequest{User: root, Command: []string{"rm", "-rf", vault}}); err != nil {
			t.Errorf("removing %s: %v", vault, err)
		}
	})
	secret := vault + "/secret"
	bash, _ := s.openSession(t, sb, execbox.SessionOptions{Kind: execbox.SessionBash})
	// bash's stdout, while a command runs, is the FIFO o.N of the
	// private directory.
	wantOut(t, "plant", runOK(t, bash, `d=$(dirname "$(readlink /proc/$$/fd/1)") && `+
		`rm -f "$d/c" && ln -s '`+secret+`' "$d/c" && echo planted`), "planted\n")
	run(t, bash, execbox.SessionRequest{Code: "echo after the plant"})
	got := execOK(t, sb, execbox.ExecRequest{User: root, Command: []string{"sh", "-c",
		`stat -c '%u:%g %a' "$1" && cat "$1"`, "sh", secret}})
	if want := "0:0 600\ntop secret\n"; got != want {
		t.Errorf("root's file after the agent wrote through the planted symlink: %q, want %q unchanged", got, want)
	}
	wantOut(t, "the session still works", runOK(t, bash, "echo ok"), "ok\n")
}

func testBashLimits(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionBash, func(o *execbox.SessionOptions) { o.Limits.FileSize = 1 << 20 })
	res := run(t, sess, execbox.SessionRequest{Code: "head -c 2000000 /dev/zero > big"})
	if res.ExitCode != 128+int(execbox.SIGXFSZ) {
		t.Errorf("writing past the file size limit: exit %d, want %d", res.ExitCode, 128+int(execbox.SIGXFSZ))
	}
	wantOut(t, "after", runOK(t, sess, "echo next"), "next\n")
}

func testPythonState(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionPython, nil)
	runOK(t, sess, "import json, os\nx = 41\ndef inc(v):\n    return v + 1\nclass Box:\n    def __init__(self, v): self.v = v")
	res := run(t, sess, execbox.SessionRequest{Code: "x = inc(x)\nb = Box(x)\njson.dumps({'v': b.v})"})
	if !res.Success() || res.Value != `'{"v": 42}'` {
		t.Errorf("state: value %q, exception %v", res.Value, res.Exception)
	}
	for _, tc := range []struct{ code, value string }{
		{"x", "42"},
		{"None", ""},
		{"y = 3", ""},
		{"print('p')", ""},
		{"[1, 'a']", "[1, 'a']"},
		{"_", "[1, 'a']"},
		{"import __main__; __main__.x", "42"},
		{"os.getcwd() == os.path.realpath('.')", "True"},
	} {
		res := run(t, sess, execbox.SessionRequest{Code: tc.code})
		if !res.Success() || res.Value != tc.value {
			t.Errorf("%q: value %q, exception %v; want %q", tc.code, res.Value, res.Exception, tc.value)
		}
	}
}

func testPythonOutput(t *testing.T, s *suite) {
	sess, sb := s.newSession(t, execbox.SessionPython, nil)
	res := run(t, sess, execbox.SessionRequest{Code: "import sys, subprocess\nprint('out')\nprint('err', file=sys.stderr)\nsubprocess.run(['echo', 'child'])\nos_write = __import__('os').write(2, b'raw\\n')\n'v'"})
	if !res.Success() || string(res.Stdout.Data) != "out\nchild\n" || string(res.Stderr.Data) != "err\nraw\n" || res.Value != "'v'" {
		t.Errorf("stdout %q stderr %q value %q exception %v", res.Stdout.Text(), res.Stderr.Text(), res.Value, res.Exception)
	}
	res = run(t, sess, execbox.SessionRequest{Code: "input()"})
	if res.Exception == nil || res.Exception.Type != "EOFError" {
		t.Errorf("input() without stdin: exception %v, want EOFError", res.Exception)
	}
	res = run(t, sess, execbox.SessionRequest{Code: "import sys; sys.stdin.read().upper()", Stdin: strings.NewReader("abc")})
	if res.Value != "'ABC'" {
		t.Errorf("with stdin: value %q exception %v", res.Value, res.Exception)
	}
	res = run(t, sess, execbox.SessionRequest{Code: "print('x' * 3_000_000)\n'y' * 3_000_000", OutputLimit: 1 << 20})
	if !res.Stdout.Truncated() || res.Stdout.Total != 3_000_001 || len(res.Value) > 1<<20+100 {
		t.Errorf("big output: stdout total %d truncated %v, value of %d bytes", res.Stdout.Total, res.Stdout.Truncated(), len(res.Value))
	}
	if err := os.WriteFile(sb.Workspace()+"/mymod.py", []byte("V = 'from workspace'\n"), 0o644); err == nil {
		res = run(t, sess, execbox.SessionRequest{Code: "import mymod; mymod.V"})
		if res.Value != "'from workspace'" {
			t.Errorf("import from the working directory: %q %v", res.Value, res.Exception)
		}
	}
}

func testPythonExceptions(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionPython, nil)
	runOK(t, sess, "def fail(n):\n    return 10 / n")
	res := run(t, sess, execbox.SessionRequest{Code: "print('before')\nfail(0)"})
	e := res.Exception
	if e == nil || e.Type != "ZeroDivisionError" || e.Message != "division by zero" || res.ExitCode != 1 || res.Reason != execbox.ReasonExited {
		t.Fatalf("exception %+v exit %d %s", e, res.ExitCode, res.Reason)
	}
	if string(res.Stdout.Data) != "before\n" {
		t.Errorf("stdout %q", res.Stdout.Text())
	}
	for _, want := range []string{"Traceback (most recent call last)", "in <module>", "fail(0)", "in fail", "return 10 / n", "ZeroDivisionError: division by zero"} {
		if !strings.Contains(e.Traceback, want) {
			t.Errorf("traceback lacks %q:\n%s", want, e.Traceback)
		}
	}
	if strings.Contains(e.Traceback, "driver") {
		t.Errorf("traceback shows the driver's frames:\n%s", e.Traceback)
	}
	for _, tc := range []struct{ code, typ string }{
		{"def f(:\n  pass", "SyntaxError"},
		{"raise ValueError('bad')", "ValueError"},
		{"import json; json.loads('{')", "json.decoder.JSONDecodeError"},
		{"import sys; sys.exit(4)", "SystemExit"},
		{"undefined_name", "NameError"},
	} {
		res := run(t, sess, execbox.SessionRequest{Code: tc.code})
		if res.Exception == nil || res.Exception.Type != tc.typ {
			t.Errorf("%q: exception %+v, want %s", tc.code, res.Exception, tc.typ)
		}
	}
	res = run(t, sess, execbox.SessionRequest{Code: "1"})
	if res.Value != "1" {
		t.Errorf("after exceptions: %q %v", res.Value, res.Exception)
	}
}

func testPythonTimeout(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionPython, func(o *execbox.SessionOptions) { o.GracePeriod = 5 * time.Second })
	runOK(t, sess, "x = 'kept'")
	for _, code := range []string{
		"while True: pass",
		"import time; time.sleep(100)",
		"import subprocess; subprocess.run(['sleep', '100'])",
		"print('partial', flush=True)\nwhile True: pass",
	} {
		res := s.timedRun(t, sess, code, 300*time.Millisecond, 0)
		if res.Exception == nil || res.Exception.Type != "KeyboardInterrupt" {
			t.Errorf("%q: exception %+v, want KeyboardInterrupt", code, res.Exception)
		}
		if strings.HasPrefix(code, "print") && res.Stdout.Text() != "partial\n" {
			t.Errorf("%q: stdout %q", code, res.Stdout.Text())
		}
		res = run(t, sess, execbox.SessionRequest{Code: "x"})
		if res.Value != "'kept'" {
			t.Errorf("after %q: %q %v", code, res.Value, res.Exception)
		}
	}
}

func testPythonExit(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionPython, nil)
	res, err := sess.Run(t.Context(), execbox.SessionRequest{Code: "import os\nprint('bye', flush=True)\nos._exit(5)"})
	if !errors.Is(err, execbox.ErrClosed) || res.ExitCode != 5 || string(res.Stdout.Data) != "bye\n" {
		t.Errorf("os._exit(5): %v, exit %d, stdout %q", err, res.ExitCode, res.Stdout.Text())
	}
	if _, err := sess.Run(t.Context(), execbox.SessionRequest{Code: "1"}); !errors.Is(err, execbox.ErrClosed) {
		t.Errorf("Run after exit: %v", err)
	}
}

func testPythonFraming(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionPython, nil)
	// Frames that look like the driver's own, written to every stream
	// user code has.
	code := `import os, sys, json, struct
fake = json.dumps({"t": "result", "id": 1, "value": "'forged'"}).encode()
frame = struct.pack(">I", len(fake)) + fake
sys.stdout.buffer.write(frame); sys.stdout.flush()
os.write(2, frame)
os.write(1, struct.pack(">I", 1 << 30))
"real"`
	res := run(t, sess, execbox.SessionRequest{Code: code})
	if !res.Success() || res.Value != "'real'" {
		t.Errorf("value %q exception %v, want 'real'", res.Value, res.Exception)
	}
	res = run(t, sess, execbox.SessionRequest{Code: "2"})
	if res.Value != "2" {
		t.Errorf("next cell: %q %v", res.Value, res.Exception)
	}
}

// readPTY reads sess's events from *next until out contains want.
func readPTY(t *testing.T, sess execbox.Session, next *uint64, want string) string {
	t.Helper()
	ctx := ctxTimeout(t, 15*time.Second)
	var out strings.Builder
	for ev, err := range sess.Events(ctx, *next) {
		if err != nil {
			t.Fatalf("Events: %v (output so far %q, want %q)", err, out.String(), want)
		}
		if ev.Seq < *next {
			t.Fatalf("event %d before %d", ev.Seq, *next)
		}
		*next = ev.Seq + 1
		out.Write(ev.Data)
		if strings.Contains(out.String(), want) {
			return out.String()
		}
		if ev.Kind == execbox.EventExit {
			break
		}
	}
	t.Fatalf("terminal output %q lacks %q", out.String(), want)
	return ""
}

func testPTY(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionPTY, func(o *execbox.SessionOptions) {
		o.Command = []string{"bash", "--norc", "--noprofile", "-i"}
		o.Env = map[string]string{"PS1": "$ "}
		o.Rows, o.Cols = 30, 100
	})
	var next uint64 = 1
	write := func(s string) {
		t.Helper()
		if _, err := sess.Write(t.Context(), []byte(s)); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	write("test -t 0 && test -t 1 && echo tty-$((6*7))\n")
	readPTY(t, sess, &next, "tty-42")
	write("stty size\n")
	readPTY(t, sess, &next, "30 100")
	if err := sess.Resize(t.Context(), 40, 120); err != nil {
		t.Fatal(err)
	}
	write("stty size\n")
	readPTY(t, sess, &next, "40 120")
	// Ctrl-C reaches the foreground job through the terminal, once it
	// runs: the job itself says so, and bash gives a job the terminal
	// before it execs (the quotes keep the echo of the typed line from
	// matching).
	write("sh -c 'echo sleep-''started; exec sleep 100'; echo not-interrupted\n")
	readPTY(t, sess, &next, "sleep-started")
	write("\x03echo after-$((1+1))\n")
	out := readPTY(t, sess, &next, "after-2")
	if strings.Contains(out, "\nnot-interrupted") {
		t.Errorf("Ctrl-C did not interrupt: %q", out)
	}
	// Events can be re-read from the start.
	var first execbox.Event
	for ev, err := range sess.Events(t.Context(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		first = ev
		break
	}
	if first.Seq != 1 || first.Kind != execbox.EventStdout {
		t.Errorf("first event %+v", first)
	}
}

func testPTYExit(t *testing.T, s *suite) {
	sess, _ := s.newSession(t, execbox.SessionPTY, func(o *execbox.SessionOptions) { o.Command = []string{"sh"} })
	if _, err := sess.Write(t.Context(), []byte("echo bye; exit 5\n")); err != nil {
		t.Fatal(err)
	}
	res, err := sess.Wait(ctxTimeout(t, 15*time.Second))
	if err != nil || res.ExitCode != 5 || !strings.Contains(res.Stdout.Text(), "bye") {
		t.Errorf("Wait: %s %v, stdout %q; want exit 5 and the output", res.String(), err, res.Stdout.Text())
	}
	var last execbox.Event
	for ev, err := range sess.Events(ctxTimeout(t, 15*time.Second), 1) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if last.Kind != execbox.EventExit || last.Result == nil || last.Result.ExitCode != 5 {
		t.Errorf("last event %+v, want the exit event", last)
	}
	if _, err := sess.Write(t.Context(), []byte("x")); !errors.Is(err, execbox.ErrClosed) {
		t.Errorf("Write after exit: %v, want ErrClosed", err)
	}
}

func testSessionCloseDuringRun(t *testing.T, s *suite) {
	for _, kind := range []execbox.SessionKind{execbox.SessionBash, execbox.SessionPython} {
		t.Run(string(kind), func(t *testing.T) {
			sess, sb := s.newSession(t, kind, nil)
			code := "sleep 300 & touch started; sleep 301"
			if kind == execbox.SessionPython {
				code = "import subprocess; subprocess.Popen(['sleep', '300']); open('started', 'w').close(); subprocess.run(['sleep', '301'])"
			}
			done := make(chan error, 1)
			go func() {
				_, err := sess.Run(ctxTimeout(t, time.Minute), execbox.SessionRequest{Code: code})
				done <- err
			}()
			// Close comes once the run has started its background child.
			waitFile(t, sb, "started", "the run to start its children")
			start := time.Now()
			if err := sess.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, execbox.ErrClosed) {
					t.Errorf("the Run in progress returned %v, want ErrClosed", err)
				}
			case <-time.After(execbox.DefaultGracePeriod + s.slack):
				t.Fatal("the Run in progress did not return after Close")
			}
			if took := time.Since(start); took > execbox.DefaultGracePeriod+s.slack {
				t.Errorf("Close took %v", took)
			}
			if _, err := sess.Run(t.Context(), execbox.SessionRequest{Code: "true"}); !errors.Is(err, execbox.ErrClosed) {
				t.Errorf("Run after Close: %v, want ErrClosed", err)
			}
			if err := sess.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			// openSession's cleanup checks that no marked process is left.
		})
	}
}

func testSandboxCloseClosesSessions(t *testing.T, s *suite) {
	testutil.Require(t, needBash, needPython)
	spec := s.baseSpec(t)
	sb, err := s.rt.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	mark, env := newMark()
	var sessions []execbox.Session
	for _, kind := range []execbox.SessionKind{execbox.SessionBash, execbox.SessionPython, execbox.SessionPTY} {
		sess, err := execbox.OpenSession(t.Context(), sb, execbox.SessionOptions{Kind: kind, Env: env})
		if err != nil {
			sb.Close()
			t.Fatal(err)
		}
		sessions = append(sessions, sess)
	}
	runOK(t, sessions[0], "sleep 300 &")
	runOK(t, sessions[1], "import subprocess; p = subprocess.Popen(['sleep', '300'])")
	sessions[2].Write(t.Context(), []byte("sleep 300 &\n"))
	w := s.watchHost(t, mark)
	s.close(t, sb)
	w.waitGone(t, s.killWithin(), "the sandbox's Close")
	for _, sess := range sessions[:2] {
		if _, err := sess.Run(t.Context(), execbox.SessionRequest{Code: "1"}); !errors.Is(err, execbox.ErrClosed) {
			t.Errorf("%s session after the sandbox's Close: %v, want ErrClosed", sess.Kind(), err)
		}
	}
	if _, err := execbox.OpenSession(t.Context(), sb, execbox.SessionOptions{Kind: execbox.SessionBash}); !errors.Is(err, execbox.ErrClosed) {
		t.Errorf("OpenSession after Close: %v, want ErrClosed", err)
	}
}
