package remote_test

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
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
