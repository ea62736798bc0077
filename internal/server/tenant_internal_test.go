package server

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/execbox/execbox"
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
