package execboxtest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/internal/testutil/streams"
)

// RunStreams checks that rt delivers every byte a command writes, in the
// Result and in the events, under load: many commands at once on a busy
// machine, a reader slower than the writer. It is apart from Run because
// it loads the machine: a runtime's tests run it on its own, not in
// parallel with the conformance suite. It needs the Go toolchain (it
// builds a static generator of known streams, put in the workspace).
func RunStreams(t *testing.T, cfg Config) {
	t.Helper()
	s := &suite{cfg: cfg, rt: cfg.Runtime, caps: cfg.Runtime.Capabilities(), slack: testutil.Scale(cfg.Slack)}
	if s.slack <= 0 {
		s.slack = 2 * time.Second
	}
	t.Run("ConcurrentExact", func(t *testing.T) { testConcurrentExact(t, s) })
	t.Run("FlowControl", func(t *testing.T) { testFlowControl(t, s) })
	t.Run("WindowDropped", func(t *testing.T) { testWindowDropped(t, s) })
}

// withStreamGen creates a sandbox with the generator of known streams in
// its workspace, as ./streamgen (see internal/testutil/streamgen).
func (s *suite) withStreamGen(t *testing.T) execbox.Sandbox {
	t.Helper()
	testutil.Require(t, testutil.Command("go"))
	bin, err := os.ReadFile(testutil.StreamGen(t))
	if err != nil {
		t.Fatal(err)
	}
	sb := s.create(t, nil)
	if err := sb.Files().WriteFile(t.Context(), "streamgen", bin, execbox.WriteOptions{Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	return sb
}

func genCommand(outSeed uint64, outSize int64, errSeed uint64, errSize int64) []string {
	return []string{"./streamgen", strconv.FormatUint(outSeed, 10), strconv.FormatInt(outSize, 10), strconv.FormatUint(errSeed, 10), strconv.FormatInt(errSize, 10)}
}

// hog keeps the sandbox's CPUs busy until the test ends.
func hog(t *testing.T, sb execbox.Sandbox) {
	t.Helper()
	for range runtime.NumCPU() {
		p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: sh("while :; do :; done"), Timeout: 10 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Kill(context.Background()) })
	}
}

// testConcurrentExact: 50 commands (Config.Writers) each writing 4 MiB to stdout and 64
// KiB to stderr at once, on a machine whose CPUs are all busy and whose
// test process (the local runtime's readers, a remote client) has one
// thread for Go code: each Result and each event stream holds every
// byte, in order, with exact totals and nothing flagged.
func testConcurrentExact(t *testing.T, s *suite) {
	sb := s.withStreamGen(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	hog(t, sb)
	const outSize, errSize = 4 << 20, 64 << 10
	n := cmp.Or(s.cfg.Writers, 50)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			seed := uint64(7000 + 2*i)
			// The events are read as they come, flow-controlled through
			// a small window, and the Results keep 1 MiB of each stream
			// (head and tail): a sandbox's agent has 256 MiB for all
			// of them.
			p, err := sb.Start(t.Context(), execbox.ExecRequest{
				Command:     genCommand(seed, outSize, seed+1, errSize),
				Timeout:     5 * time.Minute,
				OutputLimit: 1 << 20,
				EventWindow: 256 << 10,
				FlowControl: true,
			})
			if err != nil {
				t.Errorf("start %d: %v", i, err)
				return
			}
			what := fmt.Sprintf("exec %d", i)
			got := readStreams(t, what, p, 1, seed, seed+1, nil)
			got.check(t, what, outSize, errSize, 0)
			res, err := p.Wait(t.Context())
			if err != nil {
				t.Errorf("wait %d: %v", i, err)
				return
			}
			if !res.Success() {
				t.Errorf("%s: %s", what, res.String())
			}
			checkOutput(t, what+" stdout", res.Stdout, seed, outSize)
			checkOutput(t, what+" stderr", res.Stderr, seed+1, errSize)
		})
	}
	wg.Wait()
}

// checkOutput checks that o is the first size bytes of the stream of
// seed, exactly counted: all of them, or their head and tail with the
// middle counted as omitted.
func checkOutput(t *testing.T, what string, o execbox.Output, seed uint64, size int64) {
	t.Helper()
	kept := int64(len(o.Data))
	if o.Total != size || o.Omitted != size-kept || o.HeldOpen {
		t.Errorf("%s: total %d, omitted %d of %d, held open %v; want %d, %d, false", what, o.Total, o.Omitted, o.Total, o.HeldOpen, size, size-kept)
		return
	}
	want := make([]byte, size)
	_, _ = io.ReadFull(streams.New(seed), want)
	at := int64(o.OmittedAt)
	if o.Omitted == 0 {
		at = kept
	}
	if at > kept || !bytes.Equal(o.Data[:at], want[:at]) || !bytes.Equal(o.Data[at:], want[size-(kept-at):]) {
		t.Errorf("%s in the Result: %d bytes kept (omitted %d at %d) are not the stream's head and tail", what, kept, o.Omitted, o.OmittedAt)
	}
}

// received is what an events reader got of a process's two streams.
type received struct {
	out, err *streams.Checker
	dropped  int64 // the dropped events' counts
	exitSaid int64 // the exit event's Dropped
	gaps     int
	exited   bool
}

// readStreams reads p's events from seq from, checking the streams
// against their seeds; pause, if set, runs after each event (a slow
// reader). A dropped event's gap is skipped in the checkers, from its
// offset.
func readStreams(t *testing.T, what string, p execbox.Process, from uint64, outSeed, errSeed uint64, pause func()) *received {
	t.Helper()
	r := &received{out: streams.NewChecker(outSeed), err: streams.NewChecker(errSeed)}
	next := from
	for ev, err := range p.Events(t.Context(), from) {
		if err != nil {
			t.Errorf("%s: events: %v", what, err)
			return r
		}
		if ev.Seq != next && !(ev.Kind == execbox.EventDropped && ev.Seq >= next) {
			t.Errorf("%s: event seq %d (%s), want %d", what, ev.Seq, ev.Kind, next)
			return r
		}
		next = ev.Seq + 1
		switch ev.Kind {
		case execbox.EventStdout:
			r.out.Write(ev.Data)
		case execbox.EventStderr:
			r.err.Write(ev.Data)
		case execbox.EventDropped:
			r.gaps++
			r.dropped += ev.Dropped
			return r // the checkers cannot skip: what was received is checked
		case execbox.EventExit:
			r.exited = true
			r.exitSaid = ev.Dropped
		}
		if pause != nil {
			pause()
		}
	}
	return r
}

func (r *received) check(t *testing.T, what string, outSize, errSize int64, _ int) {
	t.Helper()
	if !r.exited || r.gaps > 0 {
		t.Errorf("%s: events: exit seen %v, %d gaps (%d bytes dropped); want the exit and no gap", what, r.exited, r.gaps, r.dropped)
	}
	if err := r.out.Check(outSize); err != nil {
		t.Errorf("%s: stdout events: %v", what, err)
	}
	if err := r.err.Check(errSize); err != nil {
		t.Errorf("%s: stderr events: %v", what, err)
	}
}

// testFlowControl: with FlowControl, a reader far slower than the
// command gets every byte of both streams, in order, through a window
// much smaller than the output, and the command waits for it.
func testFlowControl(t *testing.T, s *suite) {
	sb := s.withStreamGen(t)
	const size, window = 16 << 20, 256 << 10
	p, err := sb.Start(t.Context(), execbox.ExecRequest{
		Command:     genCommand(11, size, 12, size),
		Timeout:     5 * time.Minute,
		OutputLimit: 1 << 20,
		EventWindow: window,
		FlowControl: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads for a while: the command must be waiting, not done.
	time.Sleep(s.slack)
	if res, err := p.Poll(t.Context()); err != nil || res != nil {
		t.Fatalf("Poll with nobody reading the events: %v, %v; want still running (blocked on the window)", res, err)
	}
	var events int
	got := readStreams(t, "flow", p, 1, 11, 12, func() {
		if events++; events%64 == 0 {
			time.Sleep(time.Millisecond) // slower than the writer
		}
	})
	got.check(t, "flow", size, size, 0)
	if got.exitSaid != 0 {
		t.Errorf("exit event says %d bytes dropped, want 0", got.exitSaid)
	}
	res, err := p.Wait(t.Context())
	if err != nil || !res.Success() || res.Stdout.Total != size || res.Stderr.Total != size {
		t.Errorf("Wait: %v, %v; want exited 0 with totals %d", res.String(), err, size)
	}
}

// testWindowDropped: without FlowControl a reader that falls behind the
// window is told how much it missed, exactly, and so is the exit event.
func testWindowDropped(t *testing.T, s *suite) {
	sb := s.withStreamGen(t)
	const size, window = 4 << 20, 64 << 10
	p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: genCommand(21, size, 22, 0), EventWindow: window, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The process has ended: its first events are long gone.
	var data, dropped, said int64
	var gaps int
	for ev, err := range p.Events(t.Context(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case execbox.EventStdout:
			data += int64(len(ev.Data))
		case execbox.EventDropped:
			gaps++
			dropped += ev.Dropped
			if ev.Offset != dropped+data {
				t.Errorf("dropped event: offset %d, want %d", ev.Offset, dropped+data)
			}
		case execbox.EventExit:
			said = ev.Dropped
		}
	}
	if gaps != 1 || dropped <= 0 || dropped+data != size || said != dropped {
		t.Errorf("events from 1 after the window moved on: %d gaps, %d dropped + %d received (want %d), exit says %d dropped; want one gap, exact counts", gaps, dropped, data, size, said)
	}
}
