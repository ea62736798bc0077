//go:build linux

package image

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/netguard"
	"github.com/execbox/execbox/internal/testutil"
)

// internalAnswer is what a service of the server's own network answers:
// it must never reach a tenant.
const internalAnswer = "INTERNAL-ONLY-ANSWER"

// internalService is a service on the server's loopback, which a
// tenant's sandboxes cannot reach; it counts the requests it gets.
func internalService(t *testing.T) (host string, hits *atomic.Int64) {
	hits = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, internalAnswer, http.StatusForbidden) // a 5xx is retried: slower
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), hits
}

// redirect answers with a redirect to url.
func redirect(url string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, url, http.StatusTemporaryRedirect) }
}

// TestTenantPullStaysOffTheServersNetwork: a registry tenants may use
// (on loopback here, allowed as the registry named) sends a tenant's pull
// to a service on the server's loopback, by IP or by a name that
// resolves there, through a manifest's or a blob's redirect, a token
// realm or a foreign layer's URL: the server never connects, and the
// tenant gets ErrPermission. An admin's pull is not guarded (the control
// case: the service is reached). Red team, issue 22.
func TestTenantPullStaysOffTheServersNetwork(t *testing.T) {
	internal, hits := internalService(t)
	_, port, _ := net.SplitHostPort(internal)
	byName := "localhost:" + port
	img := testImage(t, "tenant")
	m, _ := img.Manifest()
	layer := blobPath("repo/img", m.Layers[1].Digest)
	for name, attack := range map[string]func(reg *fakeRegistry){
		"manifest redirect": func(reg *fakeRegistry) {
			reg.handle("/v2/repo/img/manifests/1", redirect("http://"+internal+"/v2/repo/img/manifests/1"))
		},
		"blob redirect by name": func(reg *fakeRegistry) {
			reg.handle(layer, redirect("http://"+byName+"/blob"))
		},
		"token realm by name": func(reg *fakeRegistry) {
			reg.handle("/v2/", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="http://`+byName+`/token",service="reg"`)
				w.WriteHeader(http.StatusUnauthorized)
			})
		},
		"foreign layer url": func(reg *fakeRegistry) {
			reg.image(t, img, "repo/img", "1", func(m *v1.Manifest) {
				m.Layers[1].URLs = []string{"http://" + byName + "/layer"}
			})
			reg.handle(layer, nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			reg := startFakeRegistry(t)
			reg.image(t, img, "repo/img", "1", nil)
			attack(reg)
			ref := reg.Host + "/repo/img:1"
			before := hits.Load()
			_, err := openStore(t, Options{}).Pull(netguard.ForTenant(t.Context()), ref)
			t.Logf("tenant's pull: %v", err)
			if n := hits.Load() - before; n != 0 {
				t.Errorf("a tenant's pull sent %d requests to a service on the server's loopback", n)
			}
			if !errors.Is(err, execbox.ErrPermission) || !strings.Contains(err.Error(), "refused") {
				t.Errorf("tenant's pull: %v, want ErrPermission (connection refused)", err)
			}
			if err != nil && strings.Contains(err.Error(), internalAnswer) {
				t.Errorf("the service's answer came back to the tenant: %v", err)
			}
			if name == "manifest redirect" {
				_, err := openStore(t, Options{}).Pull(t.Context(), ref)
				if hits.Load() == before {
					t.Errorf("an admin's pull did not follow the redirect (%v): the test shows nothing", err)
				}
			}
		})
	}
}

// TestTenantPullNeverEchoesAnAnswer: what the registry answers (a body
// that could be anyone's) is not in a tenant's error, which keeps its
// kind; an admin's error has it.
func TestTenantPullNeverEchoesAnAnswer(t *testing.T) {
	reg := startFakeRegistry(t)
	reg.handle("/v2/repo/img/manifests/1", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, internalAnswer, http.StatusNotFound)
	})
	ref := reg.Host + "/repo/img:1"
	s := openStore(t, Options{})
	_, err := s.Pull(netguard.ForTenant(t.Context()), ref)
	t.Logf("tenant's pull: %v", err)
	if err == nil || strings.Contains(err.Error(), internalAnswer) || !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("tenant's pull: %v, want ErrNotFound without the registry's answer", err)
	}
	if _, err := s.Pull(t.Context(), ref); err == nil || !strings.Contains(err.Error(), internalAnswer) {
		t.Errorf("admin's pull: %v, want the registry's answer", err)
	}
}

// TestTenantPullFollowsAllowedRedirects: redirects are followed where
// TenantAddr allows (a registry's CDN, on the internet; another port of
// loopback here), so that real registries keep working for tenants.
func TestTenantPullFollowsAllowedRedirects(t *testing.T) {
	cdn := startFakeRegistry(t)
	cdnAddr := netip.MustParseAddrPort(cdn.Host)
	img := testImage(t, "cdn")
	cdn.image(t, img, "repo/img", "1", nil)
	reg := startFakeRegistry(t)
	reg.image(t, img, "repo/img", "1", nil)
	m, _ := img.Manifest()
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		reg.handle(blobPath("repo/img", d.Digest), redirect("http://"+cdn.Host+blobPath("repo/img", d.Digest)))
	}
	s := openStore(t, Options{TenantAddr: func(a netip.AddrPort) bool { return a == cdnAddr }})
	if _, err := s.Pull(netguard.ForTenant(context.Background()), reg.Host+"/repo/img:1"); err != nil {
		t.Fatal(err)
	}
	if n := cdn.hit(blobPath("repo/img", m.Layers[0].Digest)); n != 1 {
		t.Errorf("the CDN served the first layer %d times", n)
	}
}

// TestTenantPullSendsNoCredentials: a red team's finding. A tenant's
// pull used the server's registry credentials (its keychain), so a
// tenant could have the server authenticate to a registry the tenant
// names, or pull a private image it has no access to. A tenant pulls
// anonymously; the server's own pull still authenticates.
func TestTenantPullSendsNoCredentials(t *testing.T) {
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{User: "alice", Password: "s3cret"})
	ref := reg.Host + "/private/img:1"
	right := authn.FromConfig(authn.AuthConfig{Username: "alice", Password: "s3cret"})
	imagetest.PushImage(t, testImage(t, "private"), ref, remote.WithAuth(right))
	s := openStore(t, Options{Keychain: keychain{right}})
	if _, err := s.Pull(netguard.ForTenant(t.Context()), ref); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("a tenant's pull of a private image with the server's credentials at hand: %v, want ErrPermission (no credentials sent)", err)
	}
	wantClean(t, s, 0)
	if _, err := s.Pull(t.Context(), ref); err != nil {
		t.Errorf("the server's own pull: %v", err)
	}
}
