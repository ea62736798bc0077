package remote_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
	"github.com/execbox/execbox/runtimes/remote"
)

// BenchmarkExecTrue compares Exec of `true` through the protocol with the
// local runtime in process, interleaved in the same loop so both see the
// same machine: through a server on loopback HTTP (the remote runtime),
// and through an agent on a unix socket (how isolated runtimes reach the
// agent in their boundary). x_local is the ratio to local.
func BenchmarkExecTrue(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	req := execbox.ExecRequest{Command: []string{truePath}}
	ctx := b.Context()

	lsb, err := local.New(local.Options{}).Create(ctx, execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lsb.Close() })

	ts := newServer(b, server.Options{})
	rt, err := remote.New(remote.Options{URL: ts.URL})
	if err != nil {
		b.Fatal(err)
	}
	rsb, err := rt.Create(ctx, execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rsb.Close() })

	asb, err := local.New(local.Options{}).Create(ctx, execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { asb.Close() })
	sock := filepath.Join(b.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	actx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.ServeSandbox(actx, ln, asb, "local", server.Options{}) }()
	b.Cleanup(func() { cancel(); <-done })
	c, err := client.New("unix://" + sock)
	if err != nil {
		b.Fatal(err)
	}
	usb, err := c.Agent(ctx)
	if err != nil {
		b.Fatal(err)
	}

	run := func(sb execbox.Sandbox) time.Duration {
		t0 := time.Now()
		res, err := sb.Exec(ctx, req)
		if err != nil || !res.Success() {
			b.Fatal(err, res.String())
		}
		return time.Since(t0)
	}
	var tl, tr, tu time.Duration
	for b.Loop() {
		tl += run(lsb)
		tr += run(rsb)
		tu += run(usb)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tl.Microseconds())/n, "local_us/op")
	b.ReportMetric(float64(tr.Microseconds())/n, "http_us/op")
	b.ReportMetric(float64(tu.Microseconds())/n, "unix_us/op")
	b.ReportMetric(float64(tr)/float64(tl), "http_x_local")
	b.ReportMetric(float64(tu)/float64(tl), "unix_x_local")
}

// BenchmarkOutput1GiB prints 1 GiB to stdout under the default 16 MiB cap
// through a server in another process (this test binary re-executed, see
// TestMain), against a raw io.Copy of the same command's pipe (x_raw,
// target at least 0.5). It reports the peak RSS of the caller and of the
// server (target under 64 MiB each).
func BenchmarkOutput1GiB(b *testing.B) {
	url, server := startServerProcess(b)
	rt, err := remote.New(remote.Options{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := rt.Create(b.Context(), execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	testutil.BenchOutput1GiB(b, sb, "remote", server, "server")
}

// serveEnv makes this test binary an execbox server over the local
// runtime (TestMain), writing its URL to the file the variable names.
const serveEnv = "EXECBOX_TEST_SERVE_URL_FILE"

func TestMain(m *testing.M) {
	if f := os.Getenv(serveEnv); f != "" {
		os.Exit(serveForBench(f))
	}
	os.Exit(testutil.LeakCheck(m.Run()))
}

func serveForBench(urlFile string) int {
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.WriteFile(urlFile, []byte("http://"+ln.Addr().String()), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err = server.Serve(ctx, ln, srv, nil, func() { srv.Close() })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startServerProcess starts this binary as a server (serveForBench) and
// returns its URL and PID; it is stopped when b ends.
func startServerProcess(b *testing.B) (string, int) {
	urlFile := filepath.Join(b.TempDir(), "url")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveEnv+"="+urlFile)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		u, err := os.ReadFile(urlFile)
		if err == nil && len(u) > 0 {
			return string(u), cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			b.Fatal("the server process did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
