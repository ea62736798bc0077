package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

// newLocal returns a local sandbox closed when t ends.
func newLocal(t *testing.T) execbox.Sandbox {
	t.Helper()
	sb, err := local.New(local.Options{Logger: testutil.Logger(t)}).Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb
}

// serveAgent serves sb at /v1/ on a unix socket and returns its path.
func serveAgent(t *testing.T, sb execbox.Sandbox, opts server.Options) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts.Logger = testutil.Logger(t)
	go func() { done <- server.ServeSandbox(ctx, ln, sb, "local", opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeSandbox: %v", err)
		}
	})
	return sock
}

func TestUnixSocketAgent(t *testing.T) {
	sb := newLocal(t)
	sock := serveAgent(t, sb, server.Options{})
	for name, newClient := range map[string]func() (*client.Client, error){
		"unix-url":    func() (*client.Client, error) { return client.New("unix://" + sock) },
		"with-socket": func() (*client.Client, error) { return client.New("http://agent", client.WithUnixSocket(sock)) },
	} {
		t.Run(name, func(t *testing.T) {
			c, err := newClient()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := t.Context()
			v, err := c.Version(ctx)
			if err != nil || v.Protocol != "v1" || v.Role != "agent" {
				t.Fatalf("Version = %+v, %v; want protocol v1, role agent", v, err)
			}
			rsb, err := c.Agent(ctx)
			if err != nil {
				t.Fatalf("Agent: %v", err)
			}
			if rsb.ID() != sb.ID() || rsb.Workspace() != sb.Workspace() {
				t.Errorf("Agent: ID %q, workspace %q; want %q, %q", rsb.ID(), rsb.Workspace(), sb.ID(), sb.Workspace())
			}
			res, err := rsb.Exec(ctx, execbox.ExecRequest{Shell: "echo out; echo err >&2; exit 3", Stdin: strings.NewReader("ignored")})
			if err != nil || res.ExitCode != 3 || string(res.Stdout.Data) != "out\n" || string(res.Stderr.Data) != "err\n" {
				t.Errorf("Exec = %s, stdout %q, stderr %q, %v", res.String(), res.Stdout.Data, res.Stderr.Data, err)
			}
			if err := rsb.Files().WriteFile(ctx, "f.txt", []byte("over the socket"), execbox.WriteOptions{}); err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			if b, err := sb.Files().ReadFile(ctx, "f.txt", execbox.ReadOptions{}); err != nil || string(b) != "over the socket" {
				t.Errorf("the sandbox's own ReadFile = %q, %v", b, err)
			}
			p, err := rsb.Start(ctx, execbox.ExecRequest{Command: []string{"cat"}, Stdin: strings.NewReader("piped")})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			var out []byte
			for ev, err := range p.Events(ctx, 1) {
				if err != nil {
					t.Fatalf("Events: %v", err)
				}
				out = append(out, ev.Data...)
			}
			if string(out) != "piped" {
				t.Errorf("events of cat fed by Start's Stdin: %q", out)
			}
			// Closing an agent's sandbox through the client leaves it to its owner.
			if err := rsb.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if _, err := rsb.Exec(ctx, execbox.ExecRequest{Command: []string{"true"}}); !errors.Is(err, execbox.ErrClosed) {
				t.Errorf("Exec after Close: %v, want ErrClosed", err)
			}
			if _, err := sb.Files().Stat(ctx, "f.txt"); err != nil {
				t.Errorf("the agent's sandbox after the client's Close: %v, want it alive", err)
			}
		})
	}
}

// cutTransport breaks the first event streams after a number of bytes,
// as a dropped connection does, and records the from= of every events
// request.
type cutTransport struct {
	base http.RoundTripper
	cuts []int // bytes after which to break each stream, in turn

	mu    sync.Mutex
	froms []string
}

func (c *cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err != nil || !strings.HasSuffix(r.URL.Path, "/events") {
		return resp, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.froms = append(c.froms, r.URL.Query().Get("from"))
	if len(c.cuts) > 0 {
		resp.Body = &cutBody{ReadCloser: resp.Body, left: c.cuts[0]}
		c.cuts = c.cuts[1:]
	}
	return resp, nil
}

type cutBody struct {
	io.ReadCloser
	left int
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errors.New("connection reset by test")
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= n
	return n, err
}

func TestEventsReconnect(t *testing.T) {
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	ctx := t.Context()

	plain, err := client.New(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := plain.Create(ctx, execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	// Many small events, written while the stream is read.
	p, err := sb.Start(ctx, execbox.ExecRequest{Command: []string{"sh", "-c",
		`i=0; while [ $i -lt 60 ]; do echo "line-$i"; i=$((i+1)); [ $((i % 10)) = 0 ] && sleep 0.02; done; echo done >&2`}})
	if err != nil {
		t.Fatal(err)
	}

	// Break the stream three times, mid-line, once before any event.
	ct := &cutTransport{base: http.DefaultTransport, cuts: []int{0, 250, 400}}
	flaky, err := client.New(ts.URL, client.WithTransport(ct), client.WithLogger(testutil.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	fsb, err := flaky.Sandbox(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	fp, err := fsb.Process(ctx, p.ID())
	if err != nil {
		t.Fatalf("Process(%s): %v", p.ID(), err)
	}
	var got []execbox.Event
	for ev, err := range fp.Events(ctx, 1) {
		if err != nil {
			t.Fatalf("Events through a breaking connection: %v after %d events", err, len(got))
		}
		got = append(got, ev)
	}
	// The truth: the same events read without breaks, after the exit.
	var want []execbox.Event
	for ev, err := range p.Events(ctx, 1) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ev)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events through a breaking connection, %d without", len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != uint64(i+1) || got[i].Seq != want[i].Seq || got[i].Kind != want[i].Kind || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Errorf("event %d: {%d %s %q}, want {%d %s %q}", i, got[i].Seq, got[i].Kind, got[i].Data, want[i].Seq, want[i].Kind, want[i].Data)
		}
	}
	if last := got[len(got)-1]; last.Kind != execbox.EventExit || last.Result == nil || !last.Result.Success() {
		t.Errorf("last event %+v, want a successful exit", last)
	}
	ct.mu.Lock()
	froms := ct.froms
	ct.mu.Unlock()
	if len(froms) != 4 {
		t.Errorf("events requests from %v, want 4 (three breaks)", froms)
	}
	// Each reconnect resumes after the last event seen.
	seen := map[string]bool{"1": true}
	for _, ev := range got {
		seen[strconv.FormatUint(ev.Seq+1, 10)] = true
	}
	for _, f := range froms {
		if !seen[f] {
			t.Errorf("a reconnect asked from=%s, not right after an event seen", f)
		}
	}
}

func TestEventsGiveUp(t *testing.T) {
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	// Every stream breaks at once: Events gives up with ErrUnavailable.
	ct := &cutTransport{base: http.DefaultTransport, cuts: []int{0, 0, 0, 0, 0, 0, 0, 0}}
	c, err := client.New(ts.URL, client.WithTransport(ct))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Create(t.Context(), execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: []string{"sleep", "10"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill(context.Background())
	var last error
	for _, err := range p.Events(t.Context(), 1) {
		last = err
	}
	if !errors.Is(last, execbox.ErrUnavailable) {
		t.Errorf("Events on a stream that always breaks: %v, want ErrUnavailable", last)
	}
}

// failingSnapshot is a sandbox whose snapshot breaks after some bytes.
type failingSnapshot struct{ execbox.Sandbox }

func (f failingSnapshot) Snapshot(ctx context.Context, w io.Writer) error {
	if _, err := io.WriteString(w, "partial tar"); err != nil {
		return err
	}
	return fmt.Errorf("disk on fire: %w", execbox.ErrResourceExhausted)
}

func TestStreamErrorTrailer(t *testing.T) {
	sb := newLocal(t)
	sock := serveAgent(t, failingSnapshot{sb}, server.Options{})
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	rsb, err := c.Agent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = rsb.Snapshot(t.Context(), &buf)
	if !errors.Is(err, execbox.ErrResourceExhausted) || !strings.Contains(fmt.Sprint(err), "disk on fire") {
		t.Errorf("Snapshot failing after the first bytes: %v, want the server's error (ErrResourceExhausted)", err)
	}
	if buf.String() != "partial tar" {
		t.Errorf("Snapshot wrote %q", buf.String())
	}
}

func TestUnreachable(t *testing.T) {
	c, err := client.New("unix://" + filepath.Join(t.TempDir(), "nobody.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Agent(t.Context()); !errors.Is(err, execbox.ErrUnavailable) {
		t.Errorf("Agent of a missing socket: %v, want ErrUnavailable", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Agent(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Agent with a cancelled context: %v, want context.Canceled", err)
	}
	for _, u := range []string{"ftp://x", "http://", "::"} {
		if _, err := client.New(u); !errors.Is(err, execbox.ErrInvalidArgument) {
			t.Errorf("New(%q): %v, want ErrInvalidArgument", u, err)
		}
	}
}

func TestProxyErrorPage(t *testing.T) {
	// A proxy's error page, not an execbox error: classified by status.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	defer ts.Close()
	c, err := client.New(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandboxes(t.Context()); !errors.Is(err, execbox.ErrUnavailable) || !strings.Contains(err.Error(), "502") {
		t.Errorf("Sandboxes through a failing proxy: %v, want ErrUnavailable naming the status", err)
	}
}

func TestExecCancelWhileStdinStreams(t *testing.T) {
	// Cancelling an Exec whose stdin is still streaming kills the command
	// and returns the partial result at once.
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	c, _ := client.New(ts.URL)
	sb, err := c.Create(t.Context(), execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	go io.WriteString(pw, "first line\n")
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		// Cancel once the command has echoed its first line.
		testutil.Poll(t.Context(), 5*time.Second, func() bool {
			b, _ := sb.Files().ReadFile(t.Context(), "seen", execbox.ReadOptions{})
			return len(b) > 0
		})
		cancel()
	}()
	start := time.Now()
	res, err := sb.Exec(ctx, execbox.ExecRequest{Command: []string{"sh", "-c", `read l; echo "$l"; echo "$l" > seen; exec cat`}, Stdin: pr})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Exec after cancel: %v, want context.Canceled", err)
	}
	if res.Reason != execbox.ReasonKilled || string(res.Stdout.Data) != "first line\n" {
		t.Errorf("Exec after cancel: %s, stdout %q; want the partial result, killed", res.String(), res.Stdout.Data)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Exec took %v", d)
	}
}
