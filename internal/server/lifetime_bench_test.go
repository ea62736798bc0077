package server_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
)

// instantRuntime makes instant sandboxes: what is left of a server's
// exec is the protocol and the server's bookkeeping.
type instantRuntime struct{}

func (instantRuntime) Name() string                          { return "bench" }
func (instantRuntime) Health(context.Context) execbox.Health { return execbox.Health{Available: true} }
func (instantRuntime) Capabilities() execbox.Capabilities    { return execbox.Capabilities{} }
func (instantRuntime) Create(context.Context, execbox.Spec) (execbox.Sandbox, error) {
	return closable{}, nil
}

// closable is an instant sandbox that a server can close.
type closable struct{ instant }

func (closable) Close() error { return nil }

// BenchmarkLifetimeExecOverhead measures an exec through a Server, whose
// sandboxes have a life (activity noted on every call, an idle timeout
// here), against the same exec through an agent's handler, which has
// none: the cost of the server's bookkeeping, lifetimes included, as a
// ratio from the same run.
func BenchmarkLifetimeExecOverhead(b *testing.B) {
	req := execbox.ExecRequest{Command: []string{"true"}}
	run := func(b *testing.B, url string, get func(*client.Client) (*client.Sandbox, error)) {
		c, _ := client.New(url)
		sb, err := get(c)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := sb.Exec(b.Context(), req); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("agent", func(b *testing.B) {
		ts := httptest.NewServer(server.NewSandboxHandler(instant{}, "bench", server.Options{}))
		defer ts.Close()
		run(b, ts.URL, func(c *client.Client) (*client.Sandbox, error) { return c.Agent(b.Context()) })
	})
	b.Run("server", func(b *testing.B) {
		srv, err := server.New([]execbox.Runtime{instantRuntime{}}, server.Options{
			Lifetimes: server.Lifetimes{ProbeInterval: -1}, // an instant sandbox has no files to check
		})
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		defer func() { ts.Close(); srv.Close() }()
		run(b, ts.URL, func(c *client.Client) (*client.Sandbox, error) {
			return c.Create(b.Context(), execbox.Spec{IdleTimeout: 3600e9}, client.CreateOptions{})
		})
	})
}
