package server_test

import (
	"context"
	"net"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
)

// instant is a sandbox whose Exec returns at once: what is left is the
// cost of the protocol.
type instant struct{ execbox.Sandbox }

func (instant) ID() string        { return "sb-instant" }
func (instant) Workspace() string { return "/w" }
func (instant) Capabilities() execbox.Capabilities {
	return execbox.Capabilities{}
}
func (instant) Exec(ctx context.Context, req execbox.ExecRequest) (execbox.Result, error) {
	return execbox.Result{Reason: execbox.ReasonExited, Stdout: execbox.Output{Data: []byte("ok\n"), Total: 3}}, nil
}

// BenchmarkExecOverhead measures one Exec through the protocol, client to
// handler and back, with an Exec that costs nothing: over loopback TCP
// and over a unix socket.
func BenchmarkExecOverhead(b *testing.B) {
	h := server.NewSandboxHandler(instant{}, "bench", server.Options{})
	req := execbox.ExecRequest{Command: []string{"true"}}
	b.Run("tcp", func(b *testing.B) {
		ts := httptest.NewServer(h)
		defer ts.Close()
		c, _ := client.New(ts.URL)
		sb, err := c.Agent(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := sb.Exec(b.Context(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unix", func(b *testing.B) {
		sock := filepath.Join(b.TempDir(), "s")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewUnstartedServer(h)
		ts.Listener = ln
		ts.Start()
		defer ts.Close()
		c, _ := client.New("unix://" + sock)
		sb, err := c.Agent(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := sb.Exec(b.Context(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
