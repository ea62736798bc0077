package remote_test

import (
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/execboxtest"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
	"github.com/execbox/execbox/runtimes/remote"
)

// newServer starts an execbox server on loopback backed by the local
// runtime, closed (with every sandbox) when t ends.
func newServer(t testing.TB, opts server.Options) *httptest.Server {
	t.Helper()
	var log *slog.Logger
	if _, ok := t.(*testing.T); ok { // benchmarks stay quiet
		log = testutil.Logger(t)
	}
	opts.Logger = log
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{Logger: log})}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	return ts
}

func TestConformance(t *testing.T) {
	// The suite uses given workspaces and host assets: this server is the
	// client's own machine.
	ts := newServer(t, server.Options{AllowHostPaths: true, Token: "s3cret"})
	rt, err := remote.New(remote.Options{URL: ts.URL, Token: "s3cret", Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	execboxtest.Run(t, execboxtest.Config{Runtime: rt})
}

func TestSessions(t *testing.T) {
	ts := newServer(t, server.Options{Token: "s3cret"})
	rt, err := remote.New(remote.Options{URL: ts.URL, Token: "s3cret", Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	execboxtest.RunSessions(t, execboxtest.Config{Runtime: rt})
}
