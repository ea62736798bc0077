package server_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/runtimes/local"
)

// Keys of the tenant tests: alice and bob are tenants, root an admin.
const (
	aliceKey = "alice-0123456789abcdef"
	bobKey   = "bob-0123456789abcdef"
	rootKey  = "root-0123456789abcdef"
)

func tenantKeys() []server.Key {
	return []server.Key{
		{Name: "alice", SHA256: sha256.Sum256([]byte(aliceKey))},
		{Name: "bob", SHA256: sha256.Sum256([]byte(bobKey))},
		{Name: "root", SHA256: sha256.Sum256([]byte(rootKey)), Admin: true},
	}
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// create makes a sandbox as key and returns its ID.
func (e *env) create(key string) string {
	e.t.Helper()
	r := e.json("POST", "/v1/sandboxes", `{}`, bearer(key)...)
	if r.status != http.StatusCreated {
		e.t.Fatalf("create: %d %s", r.status, r.body)
	}
	var info api.SandboxInfo
	if err := json.Unmarshal(r.body, &info); err != nil {
		e.t.Fatal(err)
	}
	return info.ID
}

func (e *env) list(key string) map[string]string {
	e.t.Helper()
	r := e.json("GET", "/v1/sandboxes", "", bearer(key)...)
	var l api.SandboxList
	if err := json.Unmarshal(r.body, &l); err != nil || r.status != 200 {
		e.t.Fatalf("list: %d %s", r.status, r.body)
	}
	owners := map[string]string{}
	for _, sb := range l.Sandboxes {
		owners[sb.ID] = sb.Owner
	}
	return owners
}

// errorBody is the body of an error response, without the sandbox ID.
func errorBody(r response, id string) string {
	return strings.ReplaceAll(string(r.body), id, "ID")
}

func TestTenantsCannotSeeEachOther(t *testing.T) {
	e := newEnv(t, server.Options{Keys: tenantKeys(), Token: "legacy-token-0123"})
	a, b := e.create(aliceKey), e.create(bobKey)
	if got := e.list(aliceKey); len(got) != 1 || got[a] != "alice" {
		t.Errorf("alice's list: %v, want her sandbox alone", got)
	}
	if got := e.list(bobKey); len(got) != 1 || got[b] != "bob" {
		t.Errorf("bob's list: %v, want his sandbox alone", got)
	}
	for _, admin := range []string{rootKey, "legacy-token-0123"} {
		if got := e.list(admin); len(got) != 2 || got[a] != "alice" || got[b] != "bob" {
			t.Errorf("an admin's list: %v, want both with their owners", got)
		}
	}

	// Bob reaching alice's sandbox gets what an unknown ID gets.
	unknown := e.json("GET", "/v1/sandboxes/sb-0123456789ab", "", bearer(bobKey)...)
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/v1/sandboxes/" + a, ""},
		{"GET", "/v1/sandboxes/" + a + "/info", ""},
		{"POST", "/v1/sandboxes/" + a + "/exec", `{"command":["true"]}`},
		{"GET", "/v1/sandboxes/" + a + "/files?path=.", ""},
		{"POST", "/v1/sandboxes/" + a + "/sessions", `{}`},
		{"POST", "/v1/sandboxes/" + a + "/tokens", `{}`},
		{"DELETE", "/v1/sandboxes/" + a, ""},
	} {
		r := e.json(req.method, req.path, req.body, bearer(bobKey)...)
		wantError(t, "bob: "+req.method+" "+req.path, r, http.StatusNotFound, api.CodeNotFound, "sandbox")
		if got, want := errorBody(r, a), errorBody(unknown, "sb-0123456789ab"); got != want {
			t.Errorf("bob: %s %s: %s, want exactly an unknown ID's %s", req.method, req.path, got, want)
		}
	}
	c, _ := client.New(e.ts.URL, client.WithToken(bobKey))
	if _, err := c.Sandbox(t.Context(), a); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("bob's client attaching alice's sandbox: %v, want ErrNotFound", err)
	}

	// The admin manages every sandbox.
	if r := e.json("POST", "/v1/sandboxes/"+a+"/exec", `{"command":["true"]}`, bearer(rootKey)...); r.status != 200 {
		t.Errorf("admin exec in alice's sandbox: %d %s", r.status, r.body)
	}
	if r := e.json("DELETE", "/v1/sandboxes/"+b, "", bearer(rootKey)...); r.status != http.StatusNoContent {
		t.Errorf("admin delete of bob's sandbox: %d %s", r.status, r.body)
	}
	// A deleted sandbox is closed to its owner (its info is its last
	// state), unknown to others.
	if r := e.json("GET", "/v1/sandboxes/"+b, "", bearer(bobKey)...); r.status != 200 || !strings.Contains(string(r.body), `"end_reason":"deleted"`) {
		t.Errorf("bob: his deleted sandbox's info: %d %s, want its last state", r.status, r.body)
	}
	wantError(t, "bob: exec in his deleted sandbox", e.json("POST", "/v1/sandboxes/"+b+"/exec", `{"command":["true"]}`, bearer(bobKey)...), http.StatusGone, api.CodeClosed)
	wantError(t, "alice: exec in bob's deleted sandbox", e.json("POST", "/v1/sandboxes/"+b+"/exec", `{"command":["true"]}`, bearer(aliceKey)...), http.StatusNotFound, api.CodeNotFound, "sandbox")
	wantError(t, "alice: bob's deleted sandbox", e.json("GET", "/v1/sandboxes/"+b, "", bearer(aliceKey)...), http.StatusNotFound, api.CodeNotFound, "sandbox")
	if r := e.json("GET", "/v1/sandboxes/"+a, "", bearer(aliceKey)...); r.status != 200 {
		t.Errorf("alice: her sandbox after bob's tries: %d %s", r.status, r.body)
	}
}

func TestTenantAdminRoutes(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8") // as promhttp's
		io.WriteString(w, "execbox_up 1\n")
	})
	e := newEnv(t, server.Options{Keys: tenantKeys(), Metrics: metrics})
	a := e.create(aliceKey)
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/metrics", ""},
		{"GET", "/v1/images", ""},
		{"POST", "/v1/images/pull", `{"ref":"busybox"}`},
		{"POST", "/v1/images/remove", `{"ref":"busybox"}`},
		{"POST", "/v1/images/prune", `{}`},
		{"POST", "/v1/sandboxes/" + a + "/commit", `{"dest":"x"}`},
	} {
		wantError(t, "alice: "+req.path, e.json(req.method, req.path, req.body, bearer(aliceKey)...), http.StatusForbidden, api.CodePermissionDenied)
		// The admin passes the gate: this server has no image store.
		r := e.json(req.method, req.path, req.body, bearer(rootKey)...)
		if r.status == http.StatusForbidden || r.status == http.StatusUnauthorized {
			t.Errorf("admin: %s %s: %d %s", req.method, req.path, r.status, r.body)
		}
	}
	if r := e.json("GET", "/v1/runtimes", "", bearer(aliceKey)...); r.status != 200 {
		t.Errorf("alice: runtimes: %d %s", r.status, r.body)
	}
}

func TestTenantMaximums(t *testing.T) {
	keys := tenantKeys()
	keys[0].Max = server.Maximums{Sandboxes: 2, Limits: execbox.Limits{CPUTime: 7 * time.Second, OpenFiles: 100}}
	e := newEnv(t, server.Options{Keys: keys, Max: server.Maximums{Sandboxes: 10, Limits: execbox.Limits{CPUTime: time.Minute}}})

	a := e.create(aliceKey)
	r := e.json("POST", "/v1/sandboxes/"+a+"/exec", `{"shell":"ulimit -t; ulimit -n"}`, bearer(aliceKey)...)
	var res struct{ Result api.Result }
	if err := json.Unmarshal(r.body, &res); err != nil || res.Result.Stdout.Text != "7\n100\n" {
		t.Errorf("alice's limits applied as defaults: %d %s, want 7 s of CPU time and 100 files", r.status, r.body)
	}
	r = e.json("POST", "/v1/sandboxes", `{"limits":{"cpu_time_ms":8000,"open_files":101}}`, bearer(aliceKey)...)
	wantError(t, "alice over her limits", r, http.StatusBadRequest, api.CodeInvalidArgument, "limits.cpu_time_ms", "limits.open_files")
	r = e.json("POST", "/v1/sandboxes/"+a+"/exec", `{"command":["true"],"limits":{"cpu_time_ms":8000}}`, bearer(aliceKey)...)
	wantError(t, "alice's exec over her limits", r, http.StatusBadRequest, api.CodeInvalidArgument, "limits.cpu_time_ms")
	// Bob has the server's maximums.
	b := e.create(bobKey)
	r = e.json("POST", "/v1/sandboxes/"+b+"/exec", `{"shell":"ulimit -t"}`, bearer(bobKey)...)
	if err := json.Unmarshal(r.body, &res); err != nil || res.Result.Stdout.Text != "60\n" {
		t.Errorf("bob's limits: %d %s, want the server's 60 s", r.status, r.body)
	}

	a2 := e.create(aliceKey)
	r = e.json("POST", "/v1/sandboxes", `{}`, bearer(aliceKey)...)
	wantError(t, "alice's third sandbox", r, http.StatusTooManyRequests, api.CodeResourceExhausted)
	e.create(bobKey) // the maximum is alice's alone
	if r := e.json("DELETE", "/v1/sandboxes/"+a2, "", bearer(aliceKey)...); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	e.create(aliceKey)
}

func TestSandboxTokens(t *testing.T) {
	e := newEnv(t, server.Options{Keys: tenantKeys()})
	a, other := e.create(aliceKey), e.create(aliceKey)
	tok := e.sandboxToken(aliceKey, a, `{}`)

	// The Go client works with it, on its sandbox.
	c, _ := client.New(e.ts.URL, client.WithToken(tok.Token))
	sb, err := c.Sandbox(t.Context(), a)
	if err != nil {
		t.Fatalf("attach with the sandbox token: %v", err)
	}
	if err := sb.Files().WriteFile(t.Context(), "f", []byte("hi"), execbox.WriteOptions{}); err != nil {
		t.Errorf("write a file with the sandbox token: %v", err)
	}
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"cat", "f"}})
	if err != nil || res.Stdout.Text() != "hi" {
		t.Errorf("exec with the sandbox token: %v %v", res, err)
	}
	if _, err := c.Sandbox(t.Context(), other); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("the token on another sandbox of its owner: %v, want ErrNotFound", err)
	}
	if _, err := c.Create(t.Context(), execbox.Spec{}, client.CreateOptions{}); !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("create with a sandbox token: %v, want ErrPermission", err)
	}
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/v1/sandboxes", ""},
		{"DELETE", "/v1/sandboxes/" + a, ""},
		{"POST", "/v1/sandboxes/" + a + "/tokens", `{}`},
		{"GET", "/v1/sandboxes/" + a + "/tokens", ""},
		{"GET", "/v1/runtimes", ""},
		{"GET", "/v1/images", ""},
	} {
		wantError(t, "token: "+req.method+" "+req.path, e.json(req.method, req.path, req.body, bearer(tok.Token)...), http.StatusForbidden, api.CodePermissionDenied)
	}
	wantError(t, "token on another sandbox's exec", e.json("POST", "/v1/sandboxes/"+other+"/exec", `{"command":["true"]}`, bearer(tok.Token)...),
		http.StatusNotFound, api.CodeNotFound, "sandbox")
	wantError(t, "bob minting a token for alice's sandbox", e.json("POST", "/v1/sandboxes/"+a+"/tokens", `{}`, bearer(bobKey)...),
		http.StatusNotFound, api.CodeNotFound, "sandbox")

	// Listed without secrets; revoked at once.
	r := e.json("GET", "/v1/sandboxes/"+a+"/tokens", "", bearer(aliceKey)...)
	var l api.SandboxTokenList
	if err := json.Unmarshal(r.body, &l); err != nil || len(l.Tokens) != 1 || l.Tokens[0].ID != tok.ID || l.Tokens[0].Token != "" {
		t.Errorf("token list: %d %s", r.status, r.body)
	}
	if r := e.json("DELETE", "/v1/sandboxes/"+a+"/tokens/"+tok.ID, "", bearer(aliceKey)...); r.status != http.StatusNoContent {
		t.Errorf("revoke: %d %s", r.status, r.body)
	}
	wantError(t, "a revoked token", e.json("GET", "/v1/sandboxes/"+a, "", bearer(tok.Token)...), http.StatusUnauthorized, api.CodeUnauthenticated)
	wantError(t, "revoking again", e.json("DELETE", "/v1/sandboxes/"+a+"/tokens/"+tok.ID, "", bearer(aliceKey)...), http.StatusNotFound, api.CodeNotFound, "token")

	// A token dies with its sandbox (deleted by the admin).
	tok = e.sandboxToken(rootKey, a, `{}`)
	if r := e.json("GET", "/v1/sandboxes/"+a+"/info", "", bearer(tok.Token)...); r.status != 200 {
		t.Errorf("the admin's token for alice's sandbox: %d %s", r.status, r.body)
	}
	if r := e.json("DELETE", "/v1/sandboxes/"+a, "", bearer(rootKey)...); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	wantError(t, "a token of a deleted sandbox", e.json("GET", "/v1/sandboxes/"+a, "", bearer(tok.Token)...), http.StatusUnauthorized, api.CodeUnauthenticated)
}

func TestSandboxTokenExpiry(t *testing.T) {
	e := newEnv(t, server.Options{Keys: tenantKeys()})
	a := e.create(aliceKey)
	wantError(t, "negative ttl", e.json("POST", "/v1/sandboxes/"+a+"/tokens", `{"ttl_ms":-1}`, bearer(aliceKey)...),
		http.StatusBadRequest, api.CodeInvalidArgument, "ttl_ms")
	tok := e.sandboxToken(aliceKey, a, `{"ttl_ms":300}`)
	if tok.ExpiresAt.IsZero() || tok.ExpiresAt.Sub(tok.CreatedAt) != 300*time.Millisecond {
		t.Errorf("expires_at %v, created_at %v: want 300 ms apart", tok.ExpiresAt, tok.CreatedAt)
	}
	if r := e.json("GET", "/v1/sandboxes/"+a, "", bearer(tok.Token)...); r.status != 200 && time.Now().Before(tok.ExpiresAt) {
		t.Errorf("a fresh token: %d %s", r.status, r.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.json("GET", "/v1/sandboxes/"+a, "", bearer(tok.Token)...)
		if r.status == http.StatusUnauthorized {
			if time.Now().Before(tok.ExpiresAt) {
				t.Errorf("the token was refused before its expiry")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the token still works 10 s after its expiry: %d", r.status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) sandboxToken(key, id, body string) api.SandboxToken {
	e.t.Helper()
	r := e.json("POST", "/v1/sandboxes/"+id+"/tokens", body, bearer(key)...)
	var tok api.SandboxToken
	if err := json.Unmarshal(r.body, &tok); err != nil || r.status != http.StatusCreated || len(tok.Token) != 64 || tok.Sandbox != id {
		e.t.Fatalf("create a token: %d %s", r.status, r.body)
	}
	return tok
}

// TestKeyCompare checks that only the exact key passes: the comparison
// is of SHA-256 hashes, so a prefix, an extension or one changed byte
// fail alike.
func TestKeyCompare(t *testing.T) {
	e := newEnv(t, server.Options{Keys: tenantKeys()})
	changed := []byte(aliceKey)
	changed[len(changed)-1] ^= 1
	for _, key := range []string{aliceKey[:len(aliceKey)-1], aliceKey + "0", string(changed), "", strings.ToUpper(aliceKey)} {
		wantError(t, "key "+key, e.json("GET", "/v1/sandboxes", "", bearer(key)...), http.StatusUnauthorized, api.CodeUnauthenticated)
	}
	if r := e.json("GET", "/v1/sandboxes", "", bearer(aliceKey)...); r.status != 200 {
		t.Errorf("the right key: %d %s", r.status, r.body)
	}
	if r := e.json("GET", "/v1/health", ""); r.status != 200 {
		t.Errorf("health without a key: %d %s", r.status, r.body)
	}
}

func TestBadKeys(t *testing.T) {
	sum := sha256.Sum256([]byte("k"))
	for _, tc := range []struct {
		name   string
		opts   server.Options
		fields []string
	}{
		{"no name", server.Options{Keys: []server.Key{{SHA256: sum}}}, []string{"keys[0].name"}},
		{"bad name", server.Options{Keys: []server.Key{{Name: "a b", SHA256: sum}}}, []string{"keys[0].name"}},
		{"no hash", server.Options{Keys: []server.Key{{Name: "a"}}}, []string{"keys[0].key"}},
		{"same name", server.Options{Keys: []server.Key{{Name: "a", SHA256: sum}, {Name: "a", SHA256: sha256.Sum256([]byte("j"))}}}, []string{"keys[1].name"}},
		{"same key", server.Options{Keys: []server.Key{{Name: "a", SHA256: sum}, {Name: "b", SHA256: sum}}}, []string{"keys[1].key"}},
		{"the token's name", server.Options{Token: "t", Keys: []server.Key{{Name: server.AdminName, SHA256: sum}}}, []string{"keys[0].name"}},
		{"the token", server.Options{Token: "k", Keys: []server.Key{{Name: "a", SHA256: sum}}}, []string{"keys[0].key"}},
		{"over the server", server.Options{
			Max:  server.Maximums{Sandboxes: 2, Limits: execbox.Limits{PIDs: 10}},
			Keys: []server.Key{{Name: "a", SHA256: sum, Max: server.Maximums{Sandboxes: 3, Limits: execbox.Limits{PIDs: 11}}}},
		}, []string{"keys[0].max.sandboxes", "keys[0].max.limits.pids"}},
	} {
		_, err := server.New([]execbox.Runtime{local.New(local.Options{})}, tc.opts)
		if !errors.Is(err, execbox.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", tc.name, err)
			continue
		}
		var got []string
		_ = execbox.MapFieldErrors(err, func(fe execbox.FieldError) execbox.FieldError {
			got = append(got, fe.Field)
			return fe
		})
		for _, f := range tc.fields {
			if !slices.Contains(got, f) {
				t.Errorf("%s: %v: want field %s", tc.name, err, f)
			}
		}
	}
}

// TestTenantMaximumParallel: creates in parallel cannot pass a key's
// maximum of live sandboxes, nor take another key's room.
func TestTenantMaximumParallel(t *testing.T) {
	keys := tenantKeys()
	keys[0].Max.Sandboxes = 2
	e := newEnv(t, server.Options{Keys: keys})
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	for i := range statuses {
		wg.Go(func() {
			statuses[i] = e.json("POST", "/v1/sandboxes", `{}`, bearer(aliceKey)...).status
		})
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusTooManyRequests:
		default:
			t.Errorf("status %d", s)
		}
	}
	if created != 2 || len(e.list(aliceKey)) != 2 {
		t.Errorf("%d of 8 parallel creates succeeded, alice holds %d; want 2", created, len(e.list(aliceKey)))
	}
	e.create(bobKey)
}

// TestTenantRegistries: a tenant's create may name images of the
// allowed registries only (public ones by default); an admin's any.
func TestTenantRegistries(t *testing.T) {
	for _, tc := range []struct {
		allowed []string
		image   string
		ok      bool
	}{
		{nil, "python:3.12", true},
		{nil, "ghcr.io/team/env:1", true},
		{nil, "127.0.0.1:5000/team/env:1", false},
		{nil, "registry.internal/env", false},
		{[]string{"registry.internal"}, "registry.internal/env", true},
		{[]string{"docker.io"}, "python:3.12", true},
		{[]string{}, "python:3.12", false},
	} {
		e := newEnv(t, server.Options{Keys: tenantKeys(), TenantRegistries: tc.allowed})
		// The image does not exist: a create that passes the check fails
		// later (the local runtime has no images), never with
		// permission_denied naming image.
		r := e.json("POST", "/v1/sandboxes", `{"image":"`+tc.image+`"}`, bearer(aliceKey)...)
		refused := r.status == http.StatusForbidden && strings.Contains(string(r.body), `"field":"image"`)
		if refused == tc.ok {
			t.Errorf("allowed %q, alice's image %s: %d %s", tc.allowed, tc.image, r.status, r.body)
		}
		if r := e.json("POST", "/v1/sandboxes", `{"image":"`+tc.image+`"}`, bearer(rootKey)...); r.status == http.StatusForbidden {
			t.Errorf("admin's image %s: %d %s", tc.image, r.status, r.body)
		}
	}
}
