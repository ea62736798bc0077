package proc

import (
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/internal/testutil/streams"
)

// hogCPU keeps every CPU busy with spinning processes until the test
// ends: the readers of output pipes then lag far behind the writers.
func hogCPU(t *testing.T) {
	t.Helper()
	for range 4 * runtime.NumCPU() {
		cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
}

// TestConcurrentOutputExact: 50 commands each writing 4 MiB to stdout
// and 64 KiB to stderr at once, read by one OS thread (GOMAXPROCS=1)
// while every CPU spins: each Result holds every byte, in order, with
// exact totals, and so do the events. (The Result used to be made 200
// ms after the exit, whatever the readers had not read yet lost and not
// counted.)
func TestConcurrentOutputExact(t *testing.T) {
	testutil.Require(t, testutil.Command("go"))
	gen := testutil.StreamGen(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	hogCPU(t)
	const n, outSize, errSize = 50, 4 << 20, 64 << 10
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			seed := uint64(1000 + 2*i)
			p := start(t, Options{
				Path:        gen,
				Args:        []string{"streamgen", strconv.FormatUint(seed, 10), strconv.Itoa(outSize), strconv.FormatUint(seed+1, 10), strconv.Itoa(errSize)},
				Timeout:     5 * time.Minute,
				OutputLimit: outSize,
				EventWindow: outSize + errSize,
			})
			res, err := p.Wait(t.Context())
			if err != nil {
				t.Error(err)
				return
			}
			if !res.Success() {
				t.Errorf("exec %d: %s", i, res.String())
			}
			check := func(what string, o execbox.Output, seed uint64, size int64) {
				if o.Total != size || o.Omitted != 0 || o.HeldOpen {
					t.Errorf("exec %d: %s total %d, omitted %d, held open %v; want %d, 0, false", i, what, o.Total, o.Omitted, o.HeldOpen, size)
				}
				if err := streams.Equal(seed, o.Data, size); err != nil {
					t.Errorf("exec %d: %s in the Result: %v", i, what, err)
				}
			}
			check("stdout", res.Stdout, seed, outSize)
			check("stderr", res.Stderr, seed+1, errSize)
			checkEvents(t, fmt.Sprintf("exec %d", i), p.Events(t.Context(), 1), seed, outSize, seed+1, errSize)
		})
	}
	wg.Wait()
}

// checkEvents checks that events carry the streams of seeds out and err,
// complete, from seq 1 without a gap, and end with the exit.
func checkEvents(t *testing.T, what string, events func(func(execbox.Event, error) bool), out uint64, outSize int64, errSeed uint64, errSize int64) {
	t.Helper()
	co, ce := streams.NewChecker(out), streams.NewChecker(errSeed)
	var next uint64 = 1
	exited := false
	for ev, err := range events {
		if err != nil {
			t.Errorf("%s: events: %v", what, err)
			return
		}
		if ev.Seq != next {
			t.Errorf("%s: event seq %d, want %d", what, ev.Seq, next)
			return
		}
		next++
		switch ev.Kind {
		case execbox.EventStdout:
			co.Write(ev.Data)
		case execbox.EventStderr:
			ce.Write(ev.Data)
		case execbox.EventExit:
			exited = true
		}
	}
	if !exited {
		t.Errorf("%s: events ended without the exit", what)
	}
	if err := co.Check(outSize); err != nil {
		t.Errorf("%s: stdout events: %v", what, err)
	}
	if err := ce.Check(errSize); err != nil {
		t.Errorf("%s: stderr events: %v", what, err)
	}
}
