package proc

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
)

func start(t *testing.T, opts Options) *Process {
	t.Helper()
	if opts.Path == "" {
		opts.Path = "/bin/sh"
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.GracePeriod == 0 {
		opts.GracePeriod = time.Second
	}
	if opts.OutputLimit == 0 {
		opts.OutputLimit = 1 << 20
	}
	if opts.Marker == "" {
		opts.Marker = "proctest-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/p"
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	opts.Env = append(opts.Env, "PATH=/usr/bin:/bin")
	p, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(context.Background(), execbox.ReasonKilled)
		if (treeQuery{marker: opts.Marker}).alive() {
			t.Errorf("processes with marker %s survive", opts.Marker)
		}
	})
	return p
}

func sh(script string) Options {
	return Options{Path: "/bin/sh", Args: []string{"sh", "-c", script}}
}

func TestExitAndSignal(t *testing.T) {
	tests := []struct {
		script string
		reason execbox.Reason
		code   int
		sig    execbox.Signal
	}{
		{"exit 0", execbox.ReasonExited, 0, 0},
		{"exit 42", execbox.ReasonExited, 42, 0},
		{"kill -SEGV $$", execbox.ReasonSignaled, -1, execbox.SIGSEGV},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			res, _ := start(t, sh(tt.script)).Wait(t.Context())
			if res.Reason != tt.reason || res.ExitCode != tt.code || res.Signal != tt.sig {
				t.Errorf("got %v (code %d, signal %d), want %s %d %d", res.Reason, res.ExitCode, res.Signal, tt.reason, tt.code, tt.sig)
			}
		})
	}
}

func TestTimeoutKillsEscapedDescendants(t *testing.T) {
	dir := t.TempDir()
	opts := sh(`trap '' TERM; (sleep 300 & echo $! > double) ; setsid sleep 301 & echo $! > setsid; echo started; sleep 302`)
	opts.Dir = dir
	opts.Timeout = 300 * time.Millisecond
	opts.GracePeriod = 200 * time.Millisecond
	p := start(t, opts)
	res, _ := p.Wait(t.Context())
	if res.Reason != execbox.ReasonTimedOut {
		t.Fatalf("reason = %s, want timed_out", res.Reason)
	}
	if got := res.Stdout.Text(); got != "started\n" {
		t.Errorf("partial stdout = %q", got)
	}
	for _, f := range []string{"double", "setsid"} {
		b, err := os.ReadFile(dir + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if info, ok := readStat(pid); ok && !info.zombie {
			t.Errorf("%s child %d survived the timeout", f, pid)
		}
	}
}

func TestOutputCapAndKill(t *testing.T) {
	opts := sh(`head -c 10000000 /dev/zero; echo END`)
	opts.OutputLimit = 1000
	res, _ := start(t, opts).Wait(t.Context())
	if res.Stdout.Total != 10000004 || len(res.Stdout.Data) != 1000 || !strings.HasSuffix(string(res.Stdout.Data), "END\n") {
		t.Errorf("total %d, kept %d, tail %q", res.Stdout.Total, len(res.Stdout.Data), res.Stdout.Data[len(res.Stdout.Data)-8:])
	}

	opts = sh(`yes`)
	opts.OutputLimit = 1000
	opts.KillOnOutputLimit = true
	res, _ = start(t, opts).Wait(t.Context())
	if res.Reason != execbox.ReasonOutputLimit {
		t.Errorf("reason = %s, want output_limit", res.Reason)
	}
}

func TestRlimitShim(t *testing.T) {
	opts := sh(`ulimit -t; ulimit -f; ulimit -n`)
	opts.Limits = execbox.Limits{CPUTime: 3 * time.Second, FileSize: 1024 * 1024, OpenFiles: 77}
	res, _ := start(t, opts).Wait(t.Context())
	// dash (/bin/sh on Debian) counts ulimit -f in 512-byte blocks.
	if got := res.Stdout.Text(); got != "3\n2048\n77\n" {
		t.Errorf("limits seen = %q (stderr %q)", got, res.Stderr.Text())
	}

	opts = sh(`while :; do :; done`)
	opts.Limits = execbox.Limits{CPUTime: time.Second}
	res, _ = start(t, opts).Wait(t.Context())
	if res.Reason != execbox.ReasonCPULimit {
		t.Errorf("busy loop: %v, want cpu_limit", res.String())
	}
}

func TestEventsAndStdin(t *testing.T) {
	opts := sh(`read x; echo "out $x"; echo err >&2; read y; echo "out $y"`)
	opts.Interactive = true
	opts.EventWindow = 1 << 20
	p := start(t, opts)
	ctx := t.Context()
	if _, err := p.WriteStdin(ctx, []byte("one\n")); err != nil {
		t.Fatal(err)
	}
	var seen []execbox.Event
	for ev, err := range p.Events(ctx, 1) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, ev)
		if ev.Kind == execbox.EventStderr {
			p.WriteStdin(ctx, []byte("two\n"))
			p.CloseStdin()
		}
	}
	var out strings.Builder
	for i, ev := range seen {
		if ev.Seq != uint64(i+1) {
			t.Errorf("event %d has seq %d", i, ev.Seq)
		}
		if ev.Kind == execbox.EventStdout {
			out.Write(ev.Data)
		}
	}
	if last := seen[len(seen)-1]; last.Kind != execbox.EventExit || last.Result == nil || !last.Result.Success() {
		t.Errorf("last event = %+v", last)
	}
	if out.String() != "out one\nout two\n" {
		t.Errorf("stdout events = %q", out.String())
	}
	// Re-reading from the middle yields the same tail.
	var again int
	for range p.Events(ctx, 2) {
		again++
	}
	if again != len(seen)-1 {
		t.Errorf("re-read from 2 got %d events, want %d", again, len(seen)-1)
	}
}

func TestBackgroundChildDoesNotBlockResult(t *testing.T) {
	opts := sh(`sleep 5 & echo done`)
	begin := time.Now()
	res, _ := start(t, opts).Wait(t.Context())
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("Exec waited %s for a background child", d)
	}
	if res.Stdout.Text() != "done\n" || !res.Success() {
		t.Errorf("result %v %q", res.String(), res.Stdout.Text())
	}
	// The child holds the pipes: the Result says so.
	if !res.Stdout.HeldOpen || !res.Stderr.HeldOpen {
		t.Errorf("held open: stdout %v, stderr %v; want both", res.Stdout.HeldOpen, res.Stderr.HeldOpen)
	}
}

// TestBackgroundWriterHeldOpen: a background child that writes without
// end neither holds the Result back nor makes it inexact: it holds all
// that was written until then, and says the stream was still open.
func TestBackgroundWriterHeldOpen(t *testing.T) {
	begin := time.Now()
	res, _ := start(t, sh(`echo first; yes &`)).Wait(t.Context())
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("Exec waited %s for a background writer", d)
	}
	o := res.Stdout
	if !res.Success() || !o.HeldOpen || !strings.HasPrefix(string(o.Data), "first\ny\n") || o.Total != int64(len(o.Data))+o.Omitted {
		t.Errorf("result %v: stdout held open %v, total %d, kept %d, omitted %d, starts %q", res.String(), o.HeldOpen, o.Total, len(o.Data), o.Omitted, o.Data[:min(len(o.Data), 12)])
	}
	if !res.Stderr.HeldOpen {
		t.Error("stderr: not held open, want held (yes holds it)")
	}
}

func TestNoBackgroundNotHeldOpen(t *testing.T) {
	res, _ := start(t, sh(`echo done; echo err >&2`)).Wait(t.Context())
	if res.Stdout.HeldOpen || res.Stderr.HeldOpen || res.Stdout.Text() != "done\n" {
		t.Errorf("result %v: stdout %q held open %v, stderr held open %v; want done, not held", res.String(), res.Stdout.Data, res.Stdout.HeldOpen, res.Stderr.HeldOpen)
	}
}

func TestSignal(t *testing.T) {
	p := start(t, sh(`sleep 100`))
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res, _ := p.Wait(t.Context())
	if res.Reason != execbox.ReasonSignaled || res.Signal != execbox.SIGTERM {
		t.Errorf("got %v", res.String())
	}
}
