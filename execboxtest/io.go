package execboxtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/execbox/execbox"
)

// pattern returns n deterministic bytes covering all byte values.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func testStdin(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	t.Run("reader", func(t *testing.T) {
		t.Parallel()
		res := mustExec(t, sb, execbox.ExecRequest{Command: []string{"cat"}, Stdin: strings.NewReader("hello\nworld\n")})
		if !res.Success() || string(res.Stdout.Data) != "hello\nworld\n" {
			t.Errorf("cat with stdin: %s, stdout %q; want exited 0, %q", res.String(), res.Stdout.Data, "hello\nworld\n")
		}
	})
	t.Run("nil-is-empty", func(t *testing.T) {
		t.Parallel()
		res := mustExec(t, sb, execbox.ExecRequest{Command: []string{"cat"}, Timeout: 5 * time.Second})
		if !res.Success() || len(res.Stdout.Data) != 0 {
			t.Errorf("cat with nil stdin: %s, stdout %q; want exited 0 at once with no output", res.String(), res.Stdout.Data)
		}
	})
	t.Run("large", func(t *testing.T) {
		t.Parallel()
		in := pattern(8 << 20)
		res := mustExec(t, sb, execbox.ExecRequest{Command: []string{"cat"}, Stdin: bytes.NewReader(in), OutputLimit: 16 << 20})
		if !res.Success() {
			t.Fatalf("cat of 8 MiB: %s", res.String())
		}
		if !bytes.Equal(res.Stdout.Data, in) {
			t.Errorf("cat of 8 MiB: got %d bytes back, not the input", len(res.Stdout.Data))
		}
	})
	t.Run("not-read", func(t *testing.T) {
		t.Parallel()
		res := mustExec(t, sb, execbox.ExecRequest{Command: []string{"true"}, Stdin: bytes.NewReader(pattern(8 << 20)), Timeout: 10 * time.Second})
		if !res.Success() {
			t.Errorf("true with 8 MiB of stdin it never reads: %s, want exited 0", res.String())
		}
	})
	t.Run("reader-blocks", func(t *testing.T) {
		// A caller's Stdin that never reaches EOF (a terminal, a pipe)
		// must not keep Exec waiting after the command has exited.
		t.Parallel()
		pr, pw := io.Pipe()
		defer pw.Close()
		done := make(chan execbox.Result, 1)
		go func() {
			res, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}, Stdin: pr, Timeout: 30 * time.Second})
			if err != nil {
				t.Errorf("Exec: %v", err)
			}
			done <- res
		}()
		select {
		case res := <-done:
			if !res.Success() {
				t.Errorf("true with a blocking stdin: %s, want exited 0", res.String())
			}
		case <-time.After(s.slack):
			pw.Close()
			<-done
			t.Errorf("Exec of a command that exited at once waited %v+ for a stdin reader that never returned", s.slack)
		}
	})
	t.Run("start", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		p, err := sb.Start(ctx, execbox.ExecRequest{Command: []string{"cat"}})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() { p.Kill(context.Background()) })
		for _, chunk := range []string{"hello ", "world", "\n"} {
			n, err := p.WriteStdin(ctx, []byte(chunk))
			if err != nil || n != len(chunk) {
				t.Fatalf("WriteStdin(%q) = %d, %v", chunk, n, err)
			}
		}
		if r, err := p.Poll(ctx); err != nil || r != nil {
			t.Errorf("Poll before CloseStdin = %v, %v; want nil, nil (cat waits for EOF)", r, err)
		}
		if err := p.CloseStdin(ctx); err != nil {
			t.Fatalf("CloseStdin: %v", err)
		}
		res, err := p.Wait(ctxTimeout(t, 5*time.Second+s.slack))
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if !res.Success() || string(res.Stdout.Data) != "hello world\n" {
			t.Errorf("cat fed by WriteStdin: %s, stdout %q; want exited 0, %q", res.String(), res.Stdout.Data, "hello world\n")
		}
	})
	t.Run("start-reader", func(t *testing.T) {
		t.Parallel()
		p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: []string{"cat"}, Stdin: strings.NewReader("from reader")})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		res, err := p.Wait(ctxTimeout(t, 5*time.Second+s.slack))
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if !res.Success() || string(res.Stdout.Data) != "from reader" {
			t.Errorf("Start with Stdin: %s, stdout %q; want exited 0, %q", res.String(), res.Stdout.Data, "from reader")
		}
	})
}

// checkCut checks that out is stream cut to limit as Output documents:
// Data is the first OmittedAt bytes of stream and then its last
// len(Data)-OmittedAt, and the counts add up.
func checkCut(t *testing.T, name string, out execbox.Output, stream func(off, n int64) []byte, total, limit int64) {
	t.Helper()
	if out.Total != total {
		t.Errorf("%s: Total = %d, want %d (every byte counted)", name, out.Total, total)
	}
	if !out.Truncated() {
		t.Errorf("%s: Truncated() = false for %d bytes over a %d limit", name, total, limit)
	}
	if int64(len(out.Data)) > limit {
		t.Errorf("%s: len(Data) = %d, over the limit %d (guarantee 3)", name, len(out.Data), limit)
	}
	if int64(len(out.Data)) != limit {
		t.Errorf("%s: len(Data) = %d, want the limit %d (first half and last half kept)", name, len(out.Data), limit)
	}
	if got, want := out.Omitted, out.Total-int64(len(out.Data)); got != want {
		t.Errorf("%s: Omitted = %d, want Total-len(Data) = %d", name, got, want)
	}
	at := out.OmittedAt
	if at <= 0 || at >= len(out.Data) {
		t.Fatalf("%s: OmittedAt = %d, want inside (0, %d): both the head and the tail kept", name, at, len(out.Data))
	}
	head, tail := out.Data[:at], out.Data[at:]
	if want := stream(0, int64(len(head))); !bytes.Equal(head, want) {
		t.Errorf("%s: the %d bytes before OmittedAt are not the start of the stream", name, len(head))
	}
	if want := stream(total-int64(len(tail)), int64(len(tail))); !bytes.Equal(tail, want) {
		t.Errorf("%s: the %d bytes after OmittedAt are not the end of the stream", name, len(tail))
	}
	if txt := out.Text(); !strings.Contains(txt, fmt.Sprintf("%d bytes omitted", out.Omitted)) {
		t.Errorf("%s: Text() has no omission marker", name)
	}
}

// zeroStream is head + n zero bytes + tail.
func zeroStream(head, tail string, n int64) func(off, n int64) []byte {
	total := int64(len(head)) + n + int64(len(tail))
	return func(off, k int64) []byte {
		b := make([]byte, 0, k)
		for i := off; i < off+k && i < total; i++ {
			switch {
			case i < int64(len(head)):
				b = append(b, head[i])
			case i >= total-int64(len(tail)):
				b = append(b, tail[i-(total-int64(len(tail)))])
			default:
				b = append(b, 0)
			}
		}
		return b
	}
}

func testLargeOutput(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	const n = 50 << 20
	const limit = 1 << 20
	head, tail := "EXECBOX-HEAD-MARKER\n", "EXECBOX-TAIL-MARKER\n"
	res := mustExec(t, sb, execbox.ExecRequest{
		Shell:       fmt.Sprintf("printf '%%s' '%s'; head -c %d /dev/zero; printf '%%s' '%s'", head, n, tail),
		OutputLimit: limit,
		Timeout:     60 * time.Second,
	})
	if !res.Success() {
		t.Fatalf("%s; stderr %q", res.String(), res.Stderr.Text())
	}
	total := int64(len(head) + n + len(tail))
	checkCut(t, "Stdout", res.Stdout, zeroStream(head, tail, n), total, limit)
	if !bytes.HasPrefix(res.Stdout.Data, []byte(head)) || !bytes.HasSuffix(res.Stdout.Data, []byte(tail)) {
		t.Errorf("Stdout: head or tail marker missing")
	}
	if res.Stderr.Truncated() || res.Stderr.Total != 0 {
		t.Errorf("Stderr: %+v, want empty", res.Stderr)
	}
}

func testLargeOutputBothStreams(t *testing.T, s *suite) {
	// Both streams past the pipe buffer at once: a runtime that reads one
	// stream to EOF before the other deadlocks here.
	sb := s.create(t, nil)
	const n = 8 << 20
	const limit = 64 << 10
	res := mustExec(t, sb, execbox.ExecRequest{
		Shell:       fmt.Sprintf("head -c %d /dev/zero >&2; head -c %d /dev/zero; head -c %d /dev/zero >&2", n, n, n),
		OutputLimit: limit,
		Timeout:     30 * time.Second,
	})
	if !res.Success() {
		t.Fatalf("%s", res.String())
	}
	checkCut(t, "Stdout", res.Stdout, zeroStream("", "", n), n, limit)
	checkCut(t, "Stderr", res.Stderr, zeroStream("", "", 2*n), 2*n, limit)
}

func testKillOnOutputLimit(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	const limit = 64 << 10
	start := time.Now()
	res := mustExec(t, sb, execbox.ExecRequest{
		Command:           []string{"yes", "execbox"},
		OutputLimit:       limit,
		KillOnOutputLimit: true,
		Timeout:           30 * time.Second,
	})
	if res.Reason != execbox.ReasonOutputLimit {
		t.Errorf("yes with KillOnOutputLimit: Reason %q (%s), want %q", res.Reason, res.String(), execbox.ReasonOutputLimit)
	}
	if d := time.Since(start); d > s.slack+execbox.DefaultGracePeriod {
		t.Errorf("yes with KillOnOutputLimit ran %v", d)
	}
	if int64(len(res.Stdout.Data)) > limit || !res.Stdout.Truncated() || res.Stdout.Total <= limit {
		t.Errorf("Stdout: %d bytes kept of %d, truncated %v; want at most %d kept of more", len(res.Stdout.Data), res.Stdout.Total, res.Stdout.Truncated(), limit)
	}
	if !bytes.HasPrefix(res.Stdout.Data, []byte("execbox\nexecbox\n")) {
		t.Errorf("Stdout does not start with the program's output: %q", res.Stdout.Data[:min(32, len(res.Stdout.Data))])
	}
}

func testBinaryOutput(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	want := []byte{0xff, 0xfe, 'a', 'b', 'c', 0, 0xc3, '\n'}
	script := `printf '\377\376abc\000\303\n'; printf '\377\376abc\000\303\n' >&2`
	check := func(t *testing.T, name string, out execbox.Output) {
		t.Helper()
		if !bytes.Equal(out.Data, want) {
			t.Errorf("%s: Data = %q, want the raw bytes %q", name, out.Data, want)
		}
		if out.Total != int64(len(want)) {
			t.Errorf("%s: Total = %d, want %d", name, out.Total, len(want))
		}
		txt := out.Text()
		if !utf8.ValidString(txt) || !strings.Contains(txt, "\uFFFD") || !strings.Contains(txt, "abc") {
			t.Errorf("%s: Text() = %q, want valid UTF-8 with U+FFFD for the bad bytes", name, txt)
		}
	}
	res := mustExec(t, sb, execbox.ExecRequest{Command: sh(script)})
	check(t, "Exec stdout", res.Stdout)
	check(t, "Exec stderr", res.Stderr)

	p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: sh(script)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var out, errb []byte
	for ev, err := range p.Events(ctxTimeout(t, 10*time.Second), 0) {
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		switch ev.Kind {
		case execbox.EventStdout:
			out = append(out, ev.Data...)
		case execbox.EventStderr:
			errb = append(errb, ev.Data...)
		}
	}
	if !bytes.Equal(out, want) || !bytes.Equal(errb, want) {
		t.Errorf("events: stdout %q, stderr %q; want the raw bytes %q in both", out, errb, want)
	}
}

func testStdoutStderrSeparate(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	res := mustExec(t, sb, execbox.ExecRequest{Shell: "echo out1; echo err1 >&2; echo out2; echo err2 >&2"})
	if got, want := string(res.Stdout.Data), "out1\nout2\n"; got != want {
		t.Errorf("Stdout = %q, want %q", got, want)
	}
	if got, want := string(res.Stderr.Data), "err1\nerr2\n"; got != want {
		t.Errorf("Stderr = %q, want %q", got, want)
	}
	if res.Stdout.Truncated() || res.Stderr.Truncated() {
		t.Error("small output reported truncated")
	}
}

// collect reads p's events from seq from until the exit event.
func collect(t *testing.T, p execbox.Process, from uint64, within time.Duration) []execbox.Event {
	t.Helper()
	var evs []execbox.Event
	for ev, err := range p.Events(ctxTimeout(t, within), from) {
		if err != nil {
			t.Fatalf("Events(%d): %v after %d events", from, err, len(evs))
		}
		evs = append(evs, ev)
	}
	return evs
}

func testEventsOrder(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	p, err := sb.Start(t.Context(), execbox.ExecRequest{Shell: "echo a; sleep 0.1; echo b >&2; sleep 0.1; echo c; exit 3"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	evs := collect(t, p, 1, 10*time.Second)
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	var stdout, stderr, order strings.Builder
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Errorf("event %d: Seq = %d, want %d (1, 2, 3, ... across both streams)", i, ev.Seq, i+1)
		}
		if ev.Time.IsZero() {
			t.Errorf("event %d: Time is zero", i)
		}
		switch ev.Kind {
		case execbox.EventStdout:
			stdout.Write(ev.Data)
			order.WriteString(string(ev.Data))
		case execbox.EventStderr:
			stderr.Write(ev.Data)
			order.WriteString(string(ev.Data))
		case execbox.EventExit:
			if i != len(evs)-1 {
				t.Errorf("exit event at %d of %d, want last", i, len(evs))
			}
		default:
			t.Errorf("event %d: unknown kind %q", i, ev.Kind)
		}
	}
	last := evs[len(evs)-1]
	if last.Kind != execbox.EventExit || last.Result == nil {
		t.Fatalf("last event %+v, want the exit event with a Result", last)
	}
	if last.Result.Reason != execbox.ReasonExited || last.Result.ExitCode != 3 {
		t.Errorf("exit event: %s, want exited 3", last.Result.String())
	}
	if got, want := stdout.String(), "a\nc\n"; got != want {
		t.Errorf("stdout events = %q, want %q", got, want)
	}
	if got, want := stderr.String(), "b\n"; got != want {
		t.Errorf("stderr events = %q, want %q", got, want)
	}
	if got, want := order.String(), "a\nb\nc\n"; got != want {
		t.Errorf("events in order carry %q, want %q", got, want)
	}
	res, err := p.Wait(t.Context())
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if res.Reason != last.Result.Reason || res.ExitCode != last.Result.ExitCode {
		t.Errorf("Wait = %s, exit event = %s; want the same", res.String(), last.Result.String())
	}
	if got := string(res.Stdout.Data); got != "a\nc\n" {
		t.Errorf("Wait: Stdout = %q, want %q", got, "a\nc\n")
	}
	// Re-reading after exit, as a client reconnecting does.
	for _, from := range []uint64{0, 1, 2, uint64(len(evs))} {
		again := collect(t, p, from, 5*time.Second)
		skip := int(max(from, 1)) - 1
		if len(again) != len(evs)-skip {
			t.Errorf("Events(%d) after exit: %d events, want %d", from, len(again), len(evs)-skip)
			continue
		}
		for i := range again {
			a, b := again[i], evs[skip+i]
			if a.Seq != b.Seq || a.Kind != b.Kind || !bytes.Equal(a.Data, b.Data) {
				t.Errorf("Events(%d) after exit: event %d = {%d %s %q}, want {%d %s %q}", from, i, a.Seq, a.Kind, a.Data, b.Seq, b.Kind, b.Data)
			}
		}
	}
	// Breaking out of the loop is safe.
	for range p.Events(t.Context(), 1) {
		break
	}
}

func testEventsWindow(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	const window = 4 << 10
	// 2000 separate writes of 33 bytes, far more than the window keeps.
	p, err := sb.Start(t.Context(), execbox.ExecRequest{
		Command:     sh(`i=0; while [ $i -lt 2000 ]; do echo "line-$i-................"; i=$((i+1)); done`),
		EventWindow: window,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	res, err := p.Wait(ctxTimeout(t, 20*time.Second))
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if !res.Success() {
		t.Fatalf("Wait: %s", res.String())
	}
	evs := collect(t, p, 1, 5*time.Second)
	if len(evs) == 0 {
		t.Fatal("Events(1) after exit: no events, want at least the exit event")
	}
	// A reader from 1 fell behind the window: it is told first how
	// many bytes it missed (exactly: it asked from the start), then
	// gets the events still held, the first of them after seq 1.
	if gap := evs[0]; gap.Kind != execbox.EventDropped || gap.Dropped <= 0 || gap.Offset != gap.Dropped {
		t.Errorf("Events(1) after exit: first event %+v, want a dropped event counting the bytes left out", gap)
	} else if len(evs) > 1 && evs[1].Seq <= 1 {
		t.Errorf("Events(1) after exit: first event held has Seq %d, want > 1: the window of %d bytes cannot hold all the output", evs[1].Seq, window)
	}
	var data int
	for i, ev := range evs {
		if i > 0 && ev.Seq != evs[i-1].Seq+1 {
			t.Errorf("Seq %d after %d: want consecutive", ev.Seq, evs[i-1].Seq)
		}
		data += len(ev.Data)
	}
	if data > 2*window {
		t.Errorf("re-read %d bytes of events, want about the window of %d", data, window)
	}
	if last := evs[len(evs)-1]; last.Kind != execbox.EventExit || last.Result == nil {
		t.Errorf("last event %+v, want the exit event (always retained)", last)
	}
}
