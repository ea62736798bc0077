package server_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
)

// TestPoolTenantsAndLifetimes: pools are the admin's to define; a
// sandbox taken from one is its taker's (other tenants get not_found),
// gets the lifetime its take asks for, and when reaped gives back the
// pool's count.
func TestPoolTenantsAndLifetimes(t *testing.T) {
	e := newPoolEnv(t, server.Options{Keys: tenantKeys(), Lifetimes: server.Lifetimes{ReapInterval: 20 * time.Millisecond}})
	const pool = `{"name":"p","initial":1,"min_idle":1,"max":4}`
	wantError(t, "alice defines a pool", e.json("POST", "/v1/pools", pool, bearer(aliceKey)...), http.StatusForbidden, api.CodePermissionDenied)
	// A pool's status is the admin's: its template's env may hold secrets.
	wantError(t, "alice lists pools", e.json("GET", "/v1/pools", "", bearer(aliceKey)...), http.StatusForbidden, api.CodePermissionDenied)
	if r := e.json("POST", "/v1/pools", pool, bearer(rootKey)...); r.status != http.StatusCreated {
		t.Fatalf("admin defines a pool: %d %s", r.status, r.body)
	}
	r := e.json("POST", "/v1/sandboxes", `{"pool":"p","timeout_ms":400}`, bearer(aliceKey)...)
	var info api.SandboxInfo
	if err := json.Unmarshal(r.body, &info); r.status != http.StatusCreated || err != nil {
		t.Fatalf("alice takes from the pool: %d %s", r.status, r.body)
	}
	if info.Owner != "alice" || info.Pool != "p" || info.ExpiresAt.IsZero() {
		t.Errorf("taken sandbox: owner %q, pool %q, expires_at %v; want alice, p, set", info.Owner, info.Pool, info.ExpiresAt)
	}
	wantError(t, "bob reads the pool", e.json("GET", "/v1/pools/p", "", bearer(bobKey)...), http.StatusForbidden, api.CodePermissionDenied)
	wantError(t, "bob: alice's pooled sandbox", e.json("GET", "/v1/sandboxes/"+info.ID, "", bearer(bobKey)...), http.StatusNotFound, api.CodeNotFound, "sandbox")
	testutil.Eventually(t, 10*time.Second, func() bool {
		r := e.json("GET", "/v1/sandboxes/"+info.ID, "", bearer(aliceKey)...)
		var got api.SandboxInfo
		return r.status == 200 && json.Unmarshal(r.body, &got) == nil && got.EndReason == api.EndTimeout
	}, "the pooled sandbox reaped at its lifetime")
	var st api.PoolStatus
	testutil.Eventually(t, 10*time.Second, func() bool {
		r := e.json("GET", "/v1/pools/p", "", bearer(rootKey)...)
		return json.Unmarshal(r.body, &st) == nil && st.HandedOut == 0
	}, "the pool's handed-out count back to 0 after the reaper closed its sandbox")
}
