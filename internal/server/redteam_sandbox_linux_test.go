package server_test

import (
	"crypto/sha256"
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

// TestRedTeamTenantImagePullReachesLoopback: a tenant may not pull into
// the image store (POST /v1/images/pull needs an admin key), yet a
// create naming an image the store lacks pulls it, from whatever
// registry the reference names, from the server's own network: a
// service on the server's loopback (spoken to in plain HTTP, as
// registries on loopback and private networks are), which a sandbox's
// network cannot reach, gets the server's requests, and the body of its
// answer came back to the tenant in the error. Fixed: a tenant's pull
// reaches only the registry its reference names (one of
// server.tenant_registries) and public addresses, checked on the IP
// dialled (internal/netguard), and its errors never carry an answer.
func TestRedTeamTenantImagePullReachesLoopback(t *testing.T) {
	testutil.Require(t, testutil.Root, testutil.UserNamespaces, testutil.CgroupV1orV2, testutil.StaticAgent)
	dir, err := os.MkdirTemp("", "execbox-redteam-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the sandbox's init runs the agent as another uid
		t.Fatal(err)
	}
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
	var hits atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "INTERNAL-ONLY-ANSWER", http.StatusInternalServerError)
	}))
	defer internal.Close()

	srv, err := server.New([]execbox.Runtime{rt}, server.Options{Logger: testutil.Logger(t),
		Keys: []server.Key{{Name: "mallory", SHA256: sha256.Sum256([]byte(aliceKey))}}})
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
	e := &env{t: t, srv: srv, ts: ts}
	ref := strings.TrimPrefix(internal.URL, "http://") + "/team/env:latest"
	r := e.json("POST", "/v1/sandboxes", `{"image":"`+ref+`"}`, bearer(aliceKey)...)
	if r.status == http.StatusCreated {
		t.Fatalf("create of an image from a service on loopback: %s", r.body)
	}
	t.Logf("create: %d %s", r.status, r.body)
	if n := hits.Load(); n > 0 {
		t.Errorf("a tenant's create made the server send %d requests to a service on its loopback", n)
	}
	if strings.Contains(string(r.body), "INTERNAL-ONLY-ANSWER") {
		t.Errorf("the loopback service's answer came back to the tenant: %s", r.body)
	}
}
