package server_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/image"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
	"github.com/execbox/execbox/runtimes/sandbox/sandboximage"
)

// sandboxImageEnv is a server on loopback backed by the sandbox runtime
// with an image store, as execbox serve runs it; it requires what the
// sandbox runtime needs.
func sandboxImageEnv(t *testing.T, opts server.Options) *env {
	t.Helper()
	testutil.Require(t, testutil.Root, testutil.UserNamespaces, testutil.CgroupV1orV2, testutil.StaticAgent)
	dir, err := os.MkdirTemp("", "execbox-tenantpull-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := staticAgent(t)
	store, err := image.Open(image.Options{Dir: filepath.Join(dir, "images")})
	if err != nil {
		t.Fatal(err)
	}
	rt := sandbox.New(sandbox.Options{Logger: testutil.Logger(t), StateDir: filepath.Join(dir, "state"),
		AgentBinary: bin, Images: sandboximage.New(store)})
	if h := rt.Health(t.Context()); !h.Available || !rt.Capabilities().Images {
		t.Fatalf("sandbox runtime with images unavailable as root: %s", h.Detail)
	}
	opts.Logger = testutil.Logger(t)
	srv, err := server.New([]execbox.Runtime{rt}, opts)
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
	return &env{t: t, srv: srv, ts: ts}
}

// TestTenantPullRedirectedToLoopback: a registry in
// server.tenant_registries that redirects every request to a service on
// the server's loopback does not get a tenant's create there, and the
// service's answer does not come back to the tenant; an admin's create
// is not bound (the control: the service is reached). Red team, issue 22.
func TestTenantPullRedirectedToLoopback(t *testing.T) {
	var hits atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "INTERNAL-ONLY-ANSWER", http.StatusForbidden)
	}))
	defer internal.Close()
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		http.Redirect(w, r, internal.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	e := sandboxImageEnv(t, server.Options{Keys: tenantKeys(), TenantRegistries: []string{host}})
	body := `{"image":"` + host + `/team/env:latest"}`

	r := e.json("POST", "/v1/sandboxes", body, bearer(aliceKey)...)
	t.Logf("tenant's create: %d %s", r.status, r.body)
	if r.status == http.StatusCreated {
		t.Fatal("created")
	}
	if n := hits.Load(); n > 0 {
		t.Errorf("a tenant's create made the server send %d requests to a service on its loopback", n)
	}
	if strings.Contains(string(r.body), "INTERNAL-ONLY-ANSWER") {
		t.Errorf("the loopback service's answer came back to the tenant: %s", r.body)
	}
	if r.status != http.StatusForbidden {
		t.Errorf("tenant's create: %d, want 403 (permission denied)", r.status)
	}

	r = e.json("POST", "/v1/sandboxes", body, bearer(rootKey)...)
	if r.status == http.StatusCreated || hits.Load() == 0 {
		t.Errorf("admin's create: %d %s, %d requests to the service: the test shows nothing", r.status, r.body, hits.Load())
	}
}
