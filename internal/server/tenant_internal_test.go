package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// noRuntime creates nothing: the test reaches no sandbox (the local
// runtime would import this package).
type noRuntime struct{}

func (noRuntime) Name() string                          { return "none" }
func (noRuntime) Health(context.Context) execbox.Health { return execbox.Health{} }
func (noRuntime) Capabilities() execbox.Capabilities    { return execbox.Capabilities{} }
func (noRuntime) Create(context.Context, execbox.Spec) (execbox.Sandbox, error) {
	return nil, execbox.ErrUnavailable
}

// TestPrincipalInContext checks what the policy and metrics hooks read:
// the principal of each kind of credential, through a route of the
// server's own mux.
func TestPrincipalInContext(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   Options
		bearer string
		want   Principal
	}{
		{"no auth", Options{}, "", Principal{Admin: true}},
		{"server token", Options{Token: "tok"}, "tok", Principal{Tenant: AdminName, Admin: true}},
		{"tenant key", Options{Keys: []Key{{Name: "alice", SHA256: sha256.Sum256([]byte("a-key"))}}}, "a-key", Principal{Tenant: "alice"}},
		{"admin key", Options{Keys: []Key{{Name: "ops", SHA256: sha256.Sum256([]byte("o-key")), Admin: true}}}, "o-key", Principal{Tenant: "ops", Admin: true}},
	} {
		s, err := New([]execbox.Runtime{noRuntime{}}, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		var got Principal
		var tenant string
		var ok, tenantOK bool
		s.mux.HandleFunc("GET /test/principal", func(w http.ResponseWriter, r *http.Request) {
			got, ok = PrincipalFrom(r.Context())
			tenant, tenantOK = TenantFrom(r.Context())
		})
		r := httptest.NewRequest("GET", "/test/principal", nil)
		if tc.bearer != "" {
			r.Header.Set("Authorization", "Bearer "+tc.bearer)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != 200 || !ok || got != tc.want || !tenantOK || tenant != tc.want.Tenant {
			t.Errorf("%s: status %d, principal %+v %v, tenant %q %v; want %+v", tc.name, w.Code, got, ok, tenant, tenantOK, tc.want)
		}
		s.Close()
	}
	if _, ok := PrincipalFrom(t.Context()); ok {
		t.Errorf("a principal outside a request")
	}
}

// BenchmarkAuthenticate measures finding a request's principal: the
// baseline is the server's one token (as before tenants); then 100 keys,
// each compared in constant time; then a sandbox token among 1000,
// found by its hash.
func BenchmarkAuthenticate(b *testing.B) {
	keys := func(n int) []Key {
		out := make([]Key, n)
		for i := range out {
			out[i] = Key{Name: fmt.Sprintf("k%d", i), SHA256: sha256.Sum256(fmt.Appendf(nil, "key-%d", i))}
		}
		return out
	}
	run := func(b *testing.B, k *keyring, bearer string) {
		r := httptest.NewRequest("GET", "/v1/sandboxes", nil)
		r.Header.Set("Authorization", "Bearer "+bearer)
		for b.Loop() {
			if _, ok := k.principal(r); !ok {
				b.Fatal("refused")
			}
		}
	}
	b.Run("token", func(b *testing.B) { run(b, newKeyring(Options{Token: "tok"}), "tok") })
	b.Run("keys=100", func(b *testing.B) { run(b, newKeyring(Options{Keys: keys(100)}), "key-99") })
	b.Run("sandbox-token", func(b *testing.B) {
		k := newKeyring(Options{Keys: keys(100)})
		k.live = func(string) (string, bool) { return "k0", true }
		for i := range 1000 {
			sum := sha256.Sum256(fmt.Appendf(nil, "sbt-%d", i))
			k.tokens[sum] = &sandboxToken{sum: sum, info: api.SandboxToken{ID: fmt.Sprint(i), Sandbox: "sb"}}
		}
		run(b, k, "sbt-500")
	})
}
