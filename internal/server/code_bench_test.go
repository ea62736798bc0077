package server_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
	"github.com/execbox/execbox/runtimes/remote"
)

// BenchmarkCodeRemote runs a python program through the remote runtime:
// delegated (one POST code), and step by step (a Runner with options
// cannot delegate: probes once, then mkdir, writes and exec per run),
// reporting the HTTP requests per run.
func BenchmarkCodeRemote(b *testing.B) {
	testutil.Require(b, python3)
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var requests atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		srv.ServeHTTP(w, r)
	}))
	b.Cleanup(func() { ts.Close(); srv.Close() })
	rt, err := remote.New(remote.Options{URL: ts.URL})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := rt.Create(b.Context(), execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Close() })
	req := code.Request{Language: code.Python, Source: "print(1)", Cleanup: true}
	for _, bc := range []struct {
		name string
		r    *code.Runner
	}{
		{"delegated", code.NewRunner(sb, code.Options{})},
		{"step-by-step", code.NewRunner(sb, code.Options{CacheDir: code.DefaultCacheDir})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if _, err := bc.r.Run(b.Context(), req); err != nil { // probes
				b.Fatal(err)
			}
			requests.Store(0)
			for b.Loop() {
				res, err := bc.r.Run(b.Context(), req)
				if err != nil || res.Stdout.Text() != "1\n" {
					b.Fatalf("%v %s", err, res.String())
				}
			}
			b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
		})
	}
}
