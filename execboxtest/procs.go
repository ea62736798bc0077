package execboxtest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
)

// markEnv is the variable that tags the processes a subtest starts, so the
// host can find them in /proc whatever their PID namespace.
const markEnv = "EXECBOX_CONFORMANCE_MARK"

// treeScript starts a process tree built to escape a naive kill: a plain
// background child, a double-forked grandchild (reparented away from the
// command), and a child in a new session (setsid: new session and process
// group). Every one is a sleep, and records its PID in $1/NAME.pid; the
// script itself ($1/main.pid) then sleeps in the foreground. With
// ignoreTerm, the whole tree ignores SIGTERM, so only SIGKILL ends it.
// Output goes to the command's own streams, as a careless program's would.
func treeScript(ignoreTerm bool) string {
	var b strings.Builder
	if ignoreTerm {
		b.WriteString("trap '' TERM\n")
	}
	b.WriteString(`mkdir -p "$1" && cd "$1" || exit 99
echo $$ > main.pid
sleep 300 & echo $! > bg.pid
(sleep 301 & echo $! > orphan.pid)
if command -v setsid >/dev/null 2>&1; then
	setsid sh -c 'echo $$ > session.pid; exec sleep 302' &
else
	echo 0 > session.pid
fi
echo started
sleep 303
`)
	return b.String()
}

// treePIDFiles are the files treeScript writes.
var treePIDFiles = []string{"main.pid", "bg.pid", "orphan.pid", "session.pid"}

// readTreePIDs polls the workspace through Files until treeScript has
// written every PID file under dir, and returns the PIDs (as the sandbox
// sees them).
func readTreePIDs(t *testing.T, sb execbox.Sandbox, dir string) []int {
	t.Helper()
	var pids []int
	var last error
	ok := testutil.Poll(t.Context(), 5*time.Second, func() bool {
		pids = pids[:0]
		for _, name := range treePIDFiles {
			b, err := sb.Files().ReadFile(t.Context(), path.Join(dir, name), execbox.ReadOptions{})
			if err != nil {
				last = err
				return false
			}
			n, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				last = err
				return false
			}
			if n > 0 {
				pids = append(pids, n)
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("the process tree did not record its PIDs in %s within 5s: %v", dir, last)
	}
	if len(pids) < len(treePIDFiles) {
		t.Logf("setsid is not installed in the sandbox: the new-session case is not exercised")
	}
	return pids
}

// aliveScript prints those of its PID arguments that are still running as
// one of the processes treeScript starts: zombies do not count (they are
// dead; reaping them is the business of whoever is their parent), nor does
// a PID reused by an unrelated program.
const aliveScript = `for p do
	s=$(cat /proc/$p/stat 2>/dev/null) || continue
	case $s in *") Z "*|*") X "*|*") x "*) continue ;; esac
	case $s in *"(sleep) "*|*"(sh) "*|*"(dash) "*|*"(bash) "*|*"(ash) "*|*"(busybox) "*|*"(setsid) "*) echo $p ;; esac
done`

// aliveInSandbox returns which of pids are still running, as seen from a
// new command in sb.
func aliveInSandbox(t *testing.T, sb execbox.Sandbox, pids []int) []string {
	t.Helper()
	args := make([]string, len(pids))
	for i, p := range pids {
		args[i] = strconv.Itoa(p)
	}
	return strings.Fields(shOK(t, sb, aliveScript, args...))
}

// waitGoneInSandbox polls from inside sb until none of pids runs, and
// fails t with the survivors otherwise.
func waitGoneInSandbox(t *testing.T, sb execbox.Sandbox, pids []int, within time.Duration) {
	t.Helper()
	var alive []string
	if !testutil.Poll(t.Context(), within, func() bool {
		alive = aliveInSandbox(t, sb, pids)
		return len(alive) == 0
	}) {
		t.Errorf("processes %v (of %v) still running %v later, want all gone (guarantee 2)", alive, pids, within)
	}
}

// hostMarked returns the PIDs of the host's processes whose environment
// holds markEnv=mark. Processes of an isolated runtime on this machine
// (namespaces, a local container engine) are found too, under their host
// PIDs; processes on another machine are not. Zombies have an empty
// environment and are not found.
func hostMarked(mark string) []int {
	want := []byte(markEnv + "=" + mark)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for v := range bytes.SplitSeq(b, []byte{0}) {
			if bytes.Equal(v, want) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// hostWatch tells whether the host can see a subtest's marked processes,
// and then whether they are gone.
type hostWatch struct {
	s       *suite
	mark    string
	visible bool
}

// newMark returns a fresh mark and the environment carrying it.
func newMark() (string, map[string]string) {
	m := token()
	return m, map[string]string{markEnv: m}
}

// watchHost looks for mark's processes on the host, once they are known
// to be running. If it sees none, the runtime's processes are not visible
// here (another machine, or a /proc hiding them): that is only an error
// for a runtime without isolation, whose processes are the host's own.
func (s *suite) watchHost(t *testing.T, mark string) *hostWatch {
	t.Helper()
	w := &hostWatch{s: s, mark: mark}
	w.visible = testutil.Poll(t.Context(), time.Second, func() bool { return len(hostMarked(mark)) > 0 })
	if !w.visible {
		if !s.caps.Isolation {
			t.Errorf("running processes of a runtime without isolation are not visible in the host's /proc (environment variable %s)", markEnv)
		} else {
			t.Logf("the runtime's processes are not visible in this host's /proc: host-side leftover checks skipped")
		}
	}
	return w
}

// waitGone polls the host until no marked process is left, if the host can
// see them.
func (w *hostWatch) waitGone(t *testing.T, within time.Duration, after string) {
	t.Helper()
	if !w.visible {
		return
	}
	var left []int
	if !testutil.Poll(t.Context(), within, func() bool {
		left = hostMarked(w.mark)
		return len(left) == 0
	}) {
		t.Errorf("host PIDs %v of the command still running %v after %s, want none (guarantee 2)", left, within, after)
	}
}

// killWithin is how long a tree may take to disappear after the event
// that must end it.
func (s *suite) killWithin() time.Duration { return testutil.Scale(3*time.Second) + s.slack }

func testTimeoutKillsTree(t *testing.T, s *suite) {
	s.timeoutKillsTree(t, false)
}

func testTimeoutKillsTreeIgnoringTERM(t *testing.T, s *suite) {
	s.timeoutKillsTree(t, true)
}

func (s *suite) timeoutKillsTree(t *testing.T, ignoreTerm bool) {
	sb := s.create(t, nil)
	mark, env := newMark()
	// Long enough for the tree to start and record its PIDs, on a slow
	// machine too.
	timeout := testutil.Scale(1500 * time.Millisecond)
	grace := time.Duration(0)
	if ignoreTerm {
		grace = testutil.Scale(500 * time.Millisecond)
	}
	req := execbox.ExecRequest{
		Command:     sh(treeScript(ignoreTerm), "tree"),
		Env:         env,
		Timeout:     timeout,
		GracePeriod: grace,
	}
	type outcome struct {
		res     execbox.Result
		err     error
		elapsed time.Duration
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		res, err := sb.Exec(t.Context(), req)
		done <- outcome{res, err, time.Since(start)}
	}()
	pids := readTreePIDs(t, sb, "tree")
	host := s.watchHost(t, mark)
	o := <-done
	if o.err != nil {
		t.Fatalf("Exec: %v", o.err)
	}
	if o.res.Reason != execbox.ReasonTimedOut {
		t.Errorf("Reason = %q (%s), want %q", o.res.Reason, o.res.String(), execbox.ReasonTimedOut)
	}
	if got := string(o.res.Stdout.Data); got != "started\n" {
		t.Errorf("Stdout = %q, want %q (output before the timeout is kept)", got, "started\n")
	}
	if o.elapsed < timeout {
		t.Errorf("Exec returned after %v, before the %v timeout", o.elapsed, timeout)
	}
	// A tree obeying SIGTERM ends at once; one ignoring it after grace.
	if limit := timeout + grace + s.slack; o.elapsed > limit {
		t.Errorf("Exec returned after %v, want within %v (timeout %v + grace %v + slack %v)", o.elapsed, limit, timeout, grace, s.slack)
	}
	if ignoreTerm && o.elapsed < timeout+grace {
		t.Errorf("Exec returned after %v, before timeout %v + grace %v: SIGKILL came early", o.elapsed, timeout, grace)
	}
	waitGoneInSandbox(t, sb, pids, s.killWithin())
	host.waitGone(t, s.killWithin(), "the timeout")
}

func testKillAndWait(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	mark, env := newMark()
	ctx := t.Context()
	p, err := sb.Start(ctx, execbox.ExecRequest{Command: sh(treeScript(false), "tree"), Env: env})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if p.ID() == "" {
		t.Error("Process.ID() is empty")
	}
	pids := readTreePIDs(t, sb, "tree")
	host := s.watchHost(t, mark)

	if r, err := p.Poll(ctx); err != nil || r != nil {
		t.Errorf("Poll while running = %v, %v; want nil, nil", r, err)
	}
	// Waiting with a context that ends stops the wait, not the process.
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = p.Wait(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with an expiring context: error %v, want context.DeadlineExceeded", err)
	}
	if r, err := p.Poll(ctx); err != nil || r != nil {
		t.Errorf("Poll after an abandoned Wait = %v, %v; want nil, nil (the process keeps running)", r, err)
	}

	start := time.Now()
	if err := p.Kill(ctx); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if d := time.Since(start); d > execbox.DefaultGracePeriod+s.slack {
		t.Errorf("Kill took %v for a tree obeying SIGTERM", d)
	}
	// Kill returns once the tree is gone; poll only to let zombies of
	// orphans be reaped by whoever adopted them.
	waitGoneInSandbox(t, sb, pids, s.slack)
	host.waitGone(t, s.slack, "Kill returned")

	res, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if res.Reason != execbox.ReasonKilled {
		t.Errorf("Wait: Reason = %q (%s), want %q", res.Reason, res.String(), execbox.ReasonKilled)
	}
	if res.ExitCode != -1 {
		t.Errorf("Wait: ExitCode = %d, want -1 for a killed command", res.ExitCode)
	}
	r, err := p.Poll(ctx)
	if err != nil || r == nil || r.Reason != execbox.ReasonKilled {
		t.Errorf("Poll after exit = %v, %v; want a result with Reason %q", r, err, execbox.ReasonKilled)
	}
	if err := p.Kill(ctx); err != nil {
		t.Errorf("Kill of an ended process: %v, want nil (no-op)", err)
	}
}

func testProcessSignal(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	ctx := t.Context()
	p, err := sb.Start(ctx, execbox.ExecRequest{Command: sh("echo ready; exec sleep 300")})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { p.Kill(context.Background()) })
	// Signal after the program is in place, not while sh is still starting.
	for ev, err := range p.Events(ctx, 1) {
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		if ev.Kind == execbox.EventStdout {
			break
		}
	}
	if err := p.Signal(ctx, execbox.SIGTERM); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	res, err := p.Wait(ctxTimeout(t, 5*time.Second+s.slack))
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if res.Reason != execbox.ReasonSignaled || res.Signal != execbox.SIGTERM || res.ExitCode != -1 {
		t.Errorf("after Signal(SIGTERM): %s (reason %q, signal %v, exit code %d), want reason %q, SIGTERM, -1",
			res.String(), res.Reason, res.Signal, res.ExitCode, execbox.ReasonSignaled)
	}
}

func testStartContext(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	p, err := sb.Start(ctx, execbox.ExecRequest{Command: []string{"sleep", "300"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	cancel()
	t.Cleanup(func() { p.Kill(context.Background()) })
	// A runtime that wrongly ties the process to ctx kills it now: a
	// bounded wait for its end, which returns early if it does.
	if r, err := p.Wait(ctxTimeout(t, 200*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait after cancelling Start's context = %v, %v; want the wait's deadline, the process running: Start's ctx bounds only the start", r, err)
	}
	if r, err := p.Poll(t.Context()); err != nil || r != nil {
		t.Errorf("Poll after cancelling Start's context = %v, %v; want nil, nil: Start's ctx bounds only the start", r, err)
	}
	if err := p.Kill(t.Context()); err != nil {
		t.Errorf("Kill: %v", err)
	}
}

func testContextCancel(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	mark, env := newMark()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type outcome struct {
		res     execbox.Result
		err     error
		elapsed time.Duration
	}
	done := make(chan outcome, 1)
	var start time.Time
	go func() {
		start = time.Now()
		res, err := sb.Exec(ctx, execbox.ExecRequest{Command: sh(treeScript(false), "tree"), Env: env})
		done <- outcome{res, err, time.Since(start)}
	}()
	pids := readTreePIDs(t, sb, "tree")
	host := s.watchHost(t, mark)
	cancelled := time.Now()
	cancel()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(execbox.DefaultGracePeriod + s.slack):
		t.Fatalf("Exec did not return within %v of its context being cancelled", execbox.DefaultGracePeriod+s.slack)
	}
	if !errors.Is(o.err, context.Canceled) {
		t.Errorf("Exec after cancel: error %v, want context.Canceled", o.err)
	}
	if o.res.Reason != execbox.ReasonKilled {
		t.Errorf("Exec after cancel: Reason = %q, want %q (the partial Result)", o.res.Reason, execbox.ReasonKilled)
	}
	if got := string(o.res.Stdout.Data); got != "started\n" {
		t.Errorf("Exec after cancel: Stdout = %q, want %q (the partial Result)", got, "started\n")
	}
	t.Logf("Exec returned %v after cancel", time.Since(cancelled))
	waitGoneInSandbox(t, sb, pids, s.killWithin())
	host.waitGone(t, s.killWithin(), "the context was cancelled")
}

func testCloseKillsEverything(t *testing.T, s *suite) {
	spec := s.baseSpec(t)
	sb, err := s.rt.Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			sb.Close()
		}
	})
	mark, env := newMark()
	// A started tree, and a daemon left behind by a command that exited.
	p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: sh(treeScript(false), "tree"), Env: env})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pids := readTreePIDs(t, sb, "tree")
	execOK(t, sb, execbox.ExecRequest{
		Command: sh(`setsid sh -c 'echo $$ > daemon.pid; exec sleep 304' </dev/null >/dev/null 2>&1 &`),
		Env:     env,
	})
	testutil.Eventually(t, 5*time.Second, func() bool {
		b, err := sb.Files().ReadFile(t.Context(), "daemon.pid", execbox.ReadOptions{})
		if n, err2 := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && err2 == nil {
			pids = append(pids, n)
			return true
		}
		return false
	}, "daemon.pid written")
	host := s.watchHost(t, mark)
	if host.visible && len(hostMarked(mark)) < len(pids) {
		t.Logf("host sees %d marked processes, sandbox recorded %d", len(hostMarked(mark)), len(pids))
	}

	start := time.Now()
	closed = true
	s.close(t, sb)
	if d := time.Since(start); d > execbox.DefaultGracePeriod+s.slack {
		t.Errorf("Close took %v", d)
	}
	// Close kills everything before returning; the poll only allows for
	// reaping.
	host.waitGone(t, s.slack, "Close returned")
	if host.visible && !s.caps.Isolation {
		// Same PID namespace as the host: check the recorded PIDs too.
		for _, pid := range pids {
			if hostRunning(pid) {
				t.Errorf("PID %d (recorded in the sandbox) still runs after Close", pid)
			}
		}
	}
	res, err := p.Wait(ctxTimeout(t, s.slack))
	switch {
	case errors.Is(err, execbox.ErrClosed):
	case err != nil:
		t.Errorf("Wait on a process of a closed sandbox: %v, want a Result with Reason %q or ErrClosed", err, execbox.ReasonKilled)
	case res.Reason != execbox.ReasonKilled:
		t.Errorf("Wait on a process of a closed sandbox: Reason %q, want %q", res.Reason, execbox.ReasonKilled)
	}
}

// hostRunning reports whether pid runs on the host as a sleep or shell
// (not as a zombie, not reused by another program).
func hostRunning(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	j := strings.IndexByte(s, '(')
	if i < 0 || j < 0 || i+2 >= len(s) {
		return false
	}
	if st := s[i+2]; st == 'Z' || st == 'X' || st == 'x' {
		return false
	}
	return slices.Contains([]string{"sleep", "sh", "dash", "bash", "ash", "busybox", "setsid"}, s[j+1:i])
}

func testCloseDuringExec(t *testing.T, s *suite) {
	spec := s.baseSpec(t)
	sb, err := s.rt.Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { sb.Close() })
	type outcome struct {
		res execbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: sh("echo started > started; exec sleep 300")})
		done <- outcome{res, err}
	}()
	testutil.Eventually(t, 5*time.Second, func() bool {
		_, err := sb.Files().Stat(t.Context(), "started")
		return err == nil
	}, "the command to start")
	s.close(t, sb)
	select {
	case o := <-done:
		switch {
		case errors.Is(o.err, execbox.ErrClosed):
		case o.err != nil:
			t.Errorf("Exec interrupted by Close: error %v, want a Result with Reason %q or ErrClosed", o.err, execbox.ReasonKilled)
		case o.res.Reason != execbox.ReasonKilled:
			t.Errorf("Exec interrupted by Close: Reason %q, want %q", o.res.Reason, execbox.ReasonKilled)
		}
	case <-time.After(s.slack):
		t.Errorf("Exec still running %v after Close returned", s.slack)
	}
}

// testNoLeftoverAfterExec: Exec returns once the command has ended, not
// when its output ends. The shell closes its stdout and stderr first and
// then waits for a child of its own: an Exec that returned at EOF would
// leave both running.
func testNoLeftoverAfterExec(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	mark, env := newMark()
	res := mustExec(t, sb, execbox.ExecRequest{Command: sh("echo $$; exec >/dev/null 2>&1; sleep 1"), Env: env})
	if !res.Success() {
		t.Fatalf("Exec: %s, want exited 0", res.String())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout.Data)))
	if err != nil {
		t.Fatalf("Stdout %q is not a PID", res.Stdout.Data)
	}
	if alive := aliveInSandbox(t, sb, []int{pid}); len(alive) > 0 {
		t.Errorf("the command's shell (PID %d) still runs after Exec returned", pid)
	}
	if left := hostMarked(mark); len(left) > 0 {
		t.Errorf("host PIDs %v of the command still run after Exec returned", left)
	}
}
