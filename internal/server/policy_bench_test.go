package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
)

// policyRuntime makes instant sandboxes: a Server over it costs only
// the protocol and the server's own checks.
type policyRuntime struct{}

func (policyRuntime) Name() string { return "instant" }
func (policyRuntime) Health(context.Context) execbox.Health {
	return execbox.Health{Available: true}
}
func (policyRuntime) Capabilities() execbox.Capabilities { return execbox.Capabilities{} }
func (policyRuntime) Create(context.Context, execbox.Spec) (execbox.Sandbox, error) {
	return policyInstant{}, nil
}

// policyInstant is an instant sandbox a Server may close.
type policyInstant struct{ instant }

func (policyInstant) Close() error { return nil }

// BenchmarkExecPolicy measures one Exec through a Server (client to
// handler and back over loopback TCP, with an Exec that costs nothing)
// without a policy, with a Go policy, and with a webhook on loopback
// that allows everything: the difference is what the policy adds.
func BenchmarkExecPolicy(b *testing.B) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"allow":true}`)
	}))
	defer hook.Close()
	wh, err := server.NewWebhook(server.WebhookOptions{URL: hook.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer wh.CloseIdleConnections()
	allow := server.PolicyFunc(func(context.Context, *api.PolicyAction) (api.PolicyDecision, error) {
		return api.PolicyDecision{Allow: true}, nil
	})
	req := execbox.ExecRequest{Command: []string{"python3", "-c", "print(1)"}, Env: map[string]string{"A": "1"}}
	for _, bc := range []struct {
		name   string
		policy server.Policy
	}{{"none", nil}, {"func", allow}, {"webhook", wh}} {
		b.Run(bc.name, func(b *testing.B) {
			srv, err := server.New([]execbox.Runtime{policyRuntime{}}, server.Options{Policy: bc.policy})
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			defer func() { ts.Close(); srv.Close() }()
			c, _ := client.New(ts.URL)
			defer c.Close()
			sb, err := c.Create(b.Context(), execbox.Spec{}, client.CreateOptions{})
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
}

// BenchmarkWebhookCheck measures one decision of a webhook on loopback
// that allows everything, alone: the round trip an action adds.
func BenchmarkWebhookCheck(b *testing.B) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"allow":true}`)
	}))
	defer hook.Close()
	wh, err := server.NewWebhook(server.WebhookOptions{URL: hook.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer wh.CloseIdleConnections()
	a := &api.PolicyAction{Version: api.PolicyVersion, Kind: api.ActionExec, Sandbox: api.ActionSandbox{ID: "sb-1", Runtime: "local"},
		Command: &api.ActionCommand{Command: []string{"python3", "-c", "print(1)"}, EnvNames: []string{"A"}}}
	for b.Loop() {
		if d, err := wh.Check(b.Context(), a); err != nil || !d.Allow {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkExecPolicyPaired runs each iteration's exec once through a
// Server without a policy and once through one with a loopback webhook,
// back to back, so that a loaded machine slows both alike; it reports
// the median of each and of their difference, the latency the webhook
// adds to an exec.
func BenchmarkExecPolicyPaired(b *testing.B) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"allow":true}`)
	}))
	defer hook.Close()
	wh, err := server.NewWebhook(server.WebhookOptions{URL: hook.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer wh.CloseIdleConnections()
	sandboxFor := func(p server.Policy) *client.Sandbox {
		srv, err := server.New([]execbox.Runtime{policyRuntime{}}, server.Options{Policy: p})
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		b.Cleanup(func() { ts.Close(); srv.Close() })
		c, _ := client.New(ts.URL)
		b.Cleanup(c.Close)
		sb, err := c.Create(b.Context(), execbox.Spec{}, client.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return sb
	}
	none, hooked := sandboxFor(nil), sandboxFor(wh)
	req := execbox.ExecRequest{Command: []string{"python3", "-c", "print(1)"}, Env: map[string]string{"A": "1"}}
	timed := func(sb *client.Sandbox) time.Duration {
		start := time.Now()
		if _, err := sb.Exec(b.Context(), req); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var a, h, diff []float64
	for b.Loop() {
		tn, th := timed(none), timed(hooked)
		a, h, diff = append(a, float64(tn)), append(h, float64(th)), append(diff, float64(th-tn))
	}
	b.ReportMetric(policyMedian(a), "ns/exec-none")
	b.ReportMetric(policyMedian(h), "ns/exec-webhook")
	b.ReportMetric(policyMedian(diff), "ns/added")
}

func policyMedian(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}
