package metrics_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/metrics"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/runtimes/local"
)

// instantRuntime is the local runtime whose sandboxes' Exec returns at
// once: what is left of an exec is the server's own cost.
type instantRuntime struct{ execbox.Runtime }

func (r instantRuntime) Create(ctx context.Context, spec execbox.Spec) (execbox.Sandbox, error) {
	sb, err := r.Runtime.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return instantSandbox{sb}, nil
}

type instantSandbox struct{ execbox.Sandbox }

func (instantSandbox) Exec(context.Context, execbox.ExecRequest) (execbox.Result, error) {
	return execbox.Result{Reason: execbox.ReasonExited, Stdout: execbox.Output{Data: []byte("ok\n"), Total: 3}}, nil
}

// BenchmarkObserve measures what the metrics (the Observer) and the
// access log (at info, JSON, to io.Discard) add to a request of a Server,
// against neither, in the same run: GET /v1/version (the cheapest
// route), an exec that costs nothing (instant) and a real exec of the
// local runtime (true). The handler runs in the benchmark's goroutine:
// no network, no client. cpu-ns/op is the process's CPU time per
// request, steadier than wall time on a loaded machine.
func BenchmarkObserve(b *testing.B) {
	for _, w := range []struct {
		name string
		rt   execbox.Runtime
		exec bool
	}{
		{"version", local.New(local.Options{}), false},
		{"exec-instant", instantRuntime{local.New(local.Options{})}, true},
		{"exec-true", local.New(local.Options{}), true},
	} {
		for _, v := range []struct {
			name         string
			metrics, log bool
		}{{"bare", false, false}, {"metrics", true, false}, {"log", false, true}, {"metrics+log", true, true}} {
			b.Run(w.name+"/"+v.name, func(b *testing.B) {
				opts := server.Options{}
				if v.metrics {
					m := metrics.New([]string{w.rt.Name()})
					opts.Observer, opts.Metrics = m.Observer(), m.Handler()
				}
				if v.log {
					opts.Logger = slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
				}
				benchRequest(b, w.rt, opts, w.exec)
			})
		}
	}
}

func benchRequest(b *testing.B, rt execbox.Runtime, opts server.Options, exec bool) {
	srv, err := server.New([]execbox.Runtime{rt}, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	method, path, body := "GET", "/v1/version", ""
	if exec {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, newRequest("POST", "/v1/sandboxes", "{}"))
		var info api.SandboxInfo
		if err := json.Unmarshal(w.Body.Bytes(), &info); err != nil || w.Code != 201 {
			b.Fatalf("create: %d %s", w.Code, w.Body)
		}
		method, path, body = "POST", "/v1/sandboxes/"+info.ID+"/exec", `{"command":["true"]}`
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, newRequest(method, path, body))
		if w.Code != 200 {
			b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

func newRequest(method, path, body string) *http.Request {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if method == "POST" {
		r.Header.Set("Content-Type", api.ContentJSON)
	}
	return r
}

// cpuTime is the CPU time this process has used (user and system), in
// nanoseconds; children (the commands) are not counted.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkHooks measures the Observer's hooks alone, as a request and
// an exec call them.
func BenchmarkHooks(b *testing.B) {
	obs := metrics.New([]string{"local"}).Observer()
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obs.Request(server.RequestStats{Route: "POST /v1/sandboxes/{sandbox}/exec", Status: 200, Duration: time.Millisecond})
		}
	})
	b.Run("exec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obs.Exec(server.ExecStats{Runtime: "local", Outcome: "exited", Duration: time.Millisecond})
		}
	})
}
