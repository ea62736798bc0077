package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

// flaky is a real server (the local runtime) behind a front that fails
// the next n requests, in turn with a 503 that is no execbox answer (a
// proxy's), a 502, and a connection closed without an answer.
type flaky struct {
	mu    sync.Mutex
	fail  int
	tries int // requests seen since arm
	next  http.Handler
}

func (f *flaky) arm(n int) {
	f.mu.Lock()
	f.fail, f.tries = n, 0
	f.mu.Unlock()
}

func (f *flaky) seen() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tries
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.tries++
	fail, n := f.fail > 0, f.tries
	if fail {
		f.fail--
	}
	f.mu.Unlock()
	if !fail {
		f.next.ServeHTTP(w, r)
		return
	}
	switch n % 3 {
	case 1:
		http.Error(w, "no backend", http.StatusServiceUnavailable)
	case 2:
		http.Error(w, "bad gateway", http.StatusBadGateway)
	default:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}
}

func newFlaky(t *testing.T, retry client.Retry) (*flaky, *client.Client) {
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	f := &flaky{next: srv}
	ts := httptest.NewServer(f)
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	c, err := client.New(ts.URL, client.WithRetry(retry), client.WithLogger(testutil.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return f, c
}

// TestRetry: idempotent calls get through a server that fails the
// first few times; POST and a file's DELETE are never sent twice; the
// attempts, the budget and the context bound the retries.
func TestRetry(t *testing.T) {
	fast := client.Retry{Base: time.Millisecond, Max: 10 * time.Millisecond}
	f, c := newFlaky(t, fast)
	ctx := t.Context()
	sb, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()

	// (net/http itself may resend a GET once on a reused connection
	// closed without an answer: the server sees a try more.)
	f.arm(3)
	if _, err := c.Sandboxes(ctx); err != nil || f.seen() < 4 {
		t.Errorf("GET through 3 failures: %v after %d tries; want success after 4 or more", err, f.seen())
	}
	f.arm(2)
	if err := sb.Files().WriteFile(ctx, "a.txt", []byte("same bytes"), execbox.WriteOptions{}); err != nil || f.seen() != 3 {
		t.Errorf("PUT of a file through 2 failures: %v after %d tries", err, f.seen())
	}
	if b, err := sb.Files().ReadFile(ctx, "a.txt", execbox.ReadOptions{}); err != nil || string(b) != "same bytes" {
		t.Errorf("the file written on the 3rd try: %q, %v", b, err)
	}
	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"POST exec", func() error {
			_, err := sb.Exec(ctx, execbox.ExecRequest{Command: []string{"true"}})
			return err
		}},
		{"DELETE of a file", func() error { return sb.Files().Remove(ctx, "a.txt", execbox.RemoveOptions{}) }},
	} {
		f.arm(1)
		if err := tt.call(); !errors.Is(err, execbox.ErrUnavailable) || f.seen() != 1 {
			t.Errorf("%s: %v after %d tries; want ErrUnavailable after 1", tt.name, err, f.seen())
		}
	}

	f.arm(100)
	if _, err := c.Sandboxes(ctx); !errors.Is(err, execbox.ErrUnavailable) || f.seen() < client.DefaultRetry.Attempts || f.seen() > 2*client.DefaultRetry.Attempts {
		t.Errorf("GET through 100 failures: %v after %d tries; want ErrUnavailable after %d", err, f.seen(), client.DefaultRetry.Attempts)
	}
}

// TestRetryBounds: Budget and the context stop the retries.
func TestRetryBounds(t *testing.T) {
	f, c := newFlaky(t, client.Retry{Attempts: 1000, Base: 20 * time.Millisecond, Max: 20 * time.Millisecond, Budget: 200 * time.Millisecond})
	f.arm(1 << 20)
	start := time.Now()
	if _, err := c.Sandboxes(t.Context()); !errors.Is(err, execbox.ErrUnavailable) {
		t.Errorf("GET past the budget: %v", err)
	}
	if d := time.Since(start); d > testutil.Scale(2*time.Second) || f.seen() >= 1000 {
		t.Errorf("GET past a 200ms budget took %v and %d tries", d, f.seen())
	}

	f, c = newFlaky(t, client.Retry{Attempts: 1000, Base: time.Hour, Max: time.Hour, Budget: 2 * time.Hour})
	f.arm(1 << 20)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := c.Sandboxes(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GET past the context's deadline: %v", err)
	}
	if d := time.Since(start); d > testutil.Scale(2*time.Second) {
		t.Errorf("the context's deadline stopped retries after %v", d)
	}

	f, c = newFlaky(t, client.Retry{Attempts: 1})
	f.arm(1)
	if _, err := c.Sandboxes(t.Context()); !errors.Is(err, execbox.ErrUnavailable) || f.seen() != 1 {
		t.Errorf("Attempts 1: %v after %d tries", err, f.seen())
	}
	if _, err := client.New("http://x", client.WithRetry(client.Retry{Attempts: -1, Budget: -1})); !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("negative retry settings: %v", err)
	}
}

// TestRetryServerRestart: a GET to a server that is not listening yet
// (a restart under way) gets through once it listens.
func TestRetryServerRestart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	retries := &counter{}
	c, err := client.New("http://"+addr, client.WithLogger(slog.New(retries)),
		client.WithRetry(client.Retry{Attempts: 100, Base: 20 * time.Millisecond, Max: 100 * time.Millisecond, Budget: 20 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	done := make(chan error, 1)
	go func() {
		_, err := c.Sandboxes(t.Context())
		done <- err
	}()
	testutil.Eventually(t, 10*time.Second, func() bool { return retries.n.Load() >= 2 }, "the client to retry")
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the port was taken meanwhile: %v", err)
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	defer hs.Close()
	if err := <-done; err != nil {
		t.Errorf("GET across the restart: %v", err)
	}
}

// counter is a slog handler counting the client's "retrying" records.
type counter struct{ n atomic.Int64 }

func (c *counter) Enabled(context.Context, slog.Level) bool { return true }
func (c *counter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "retrying" {
		c.n.Add(1)
	}
	return nil
}
func (c *counter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *counter) WithGroup(string) slog.Handler      { return c }

// TestRetryAfter: a call the server refused with 429 and Retry-After (a
// maximum reached: nothing was done), POST exec too, is sent again after
// the wait the server asked for, and gets through once there is room;
// with retries off, the refusal is the answer.
func TestRetryAfter(t *testing.T) {
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})},
		server.Options{Logger: testutil.Logger(t), Max: server.Maximums{Processes: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusOf{ResponseWriter: w}
		srv.ServeHTTP(rec, r)
		if rec.status == http.StatusTooManyRequests {
			refused.Add(1)
		}
	}))
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	ctx := t.Context()
	for _, tt := range []struct {
		name  string
		retry client.Retry
		want  bool // the exec gets through
	}{
		{"retried", client.Retry{}, true},
		{"off", client.Retry{Attempts: 1}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.New(ts.URL, client.WithRetry(tt.retry))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sb, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			// The one process this sandbox may run, for a second.
			p, err := sb.Start(ctx, execbox.ExecRequest{Command: []string{"sleep", "1.5"}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Kill(ctx)
			refused.Store(0)
			t0 := time.Now()
			res, err := sb.Exec(ctx, execbox.ExecRequest{Shell: "echo ran"})
			took := time.Since(t0)
			switch {
			case tt.want && (err != nil || string(res.Stdout.Data) != "ran\n" || refused.Load() == 0 || took < time.Second):
				t.Errorf("exec while the sandbox runs its maximum: %q, %v after %v and %d refusals; want it run after at least one 429 and a wait of Retry-After (1s)",
					res.Stdout.Data, err, took, refused.Load())
			case !tt.want && (!errors.Is(err, execbox.ErrResourceExhausted) || refused.Load() != 1):
				t.Errorf("exec with retries off: %v after %d refusals; want ErrResourceExhausted at the first", err, refused.Load())
			}
		})
	}
}

// statusOf notes the status of a response.
type statusOf struct {
	http.ResponseWriter
	status int
}

func (s *statusOf) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
