package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// AdminName is the tenant name of Options.Token: the admin key every
// server had before there were tenants.
const AdminName = "admin"

// Key is an API key of a Server: a tenant. The Server holds only the
// key's SHA-256, never the key.
type Key struct {
	// Name names the tenant: the owner of the sandboxes it creates
	// (SandboxInfo.Owner), in logs and metrics. 1 to 64 of A-Z a-z 0-9
	// . _ -.
	Name string
	// SHA256 is the SHA-256 of the bearer token.
	SHA256 [sha256.Size]byte
	// Admin keys see and manage every sandbox, and alone may use the
	// image store (/v1/images, commit).
	Admin bool
	// Max bounds the key's requests: Sandboxes its live sandboxes, and
	// Limits its sandboxes' and commands' limits, applied as defaults as
	// the server's Options.Max.Limits are. Each must be within the
	// server's maximum. Its other fields are not used.
	Max Maximums
}

// Principal is who made a request: the key it carried, or a sandbox
// token. Handlers and hooks read it with PrincipalFrom.
type Principal struct {
	// Tenant is the key's name; for a sandbox token, the name of the key
	// owning the sandbox. Empty on a server without authentication.
	Tenant string
	// Admin is set for admin keys, Options.Token, and every request to a
	// server without authentication.
	Admin bool
	// Sandbox, if set, is the one sandbox a sandbox token reaches.
	Sandbox string

	ended context.Context // a sandbox token's: done when the token ends
}

type principalKey struct{}

// PrincipalFrom returns the principal of a request's context; ok is
// false outside a Server's or agent's handlers.
func PrincipalFrom(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// TenantFrom returns the tenant name of a request's context (see
// Principal.Tenant); ok is false outside a Server's or agent's handlers.
func TenantFrom(ctx context.Context) (name string, ok bool) {
	p, ok := PrincipalFrom(ctx)
	return p.Tenant, ok
}

func principal(r *http.Request) Principal {
	p, _ := PrincipalFrom(r.Context())
	return p
}

// keyring authenticates requests: the keys (Options.Keys and
// Options.Token) and the sandbox tokens a Server gave out.
//
// Keys are few and may be chosen by people, so the presented token's
// SHA-256 is compared with every key's in constant time, all of them
// every time: which key matched, or how many bytes of one did, never
// shows in the time taken. Sandbox tokens are many and 256 random bits,
// so they are found by their SHA-256 in a map: the time of a map lookup
// depends on the presented token's hash, which tells an attacker nothing
// about any token (finding a preimage of a stored hash is as hard as
// guessing the token).
type keyring struct {
	keys []Key
	open bool // no key: every request is an admin's

	// live reports whether a sandbox is held, and its owner; nil (an
	// agent) disables sandbox tokens. Called with mu held.
	live func(id string) (owner string, ok bool)

	mu     sync.Mutex
	tokens map[[sha256.Size]byte]*sandboxToken
}

func newKeyring(opts Options) *keyring {
	k := &keyring{tokens: make(map[[sha256.Size]byte]*sandboxToken)}
	if opts.Token != "" {
		k.keys = append(k.keys, Key{Name: AdminName, SHA256: sha256.Sum256([]byte(opts.Token)), Admin: true})
	}
	k.keys = append(k.keys, opts.Keys...)
	k.open = len(k.keys) == 0
	return k
}

// authError is why a request is refused before its handler.
type authError struct {
	status int
	err    *api.Error
}

func (e *authError) Error() string { return e.err.Message }

var errUnauthenticated = &authError{http.StatusUnauthorized,
	&api.Error{Code: api.CodeUnauthenticated, Message: "missing or wrong bearer token"}}

// authenticate finds r's principal and returns r carrying it, or why r
// is refused: no valid token (401), or a route its principal may not
// use (403). Probes and version discovery need no token.
//
// The request of a sandbox token ends when the token does (revoked,
// expired): done, which the caller calls when the request has been
// answered, releases what ties them.
func (c *core) authenticate(r *http.Request) (_ *http.Request, done func(), _ *authError) {
	done = func() {}
	p, ok := c.keys.principal(r)
	if !ok && !public(r) {
		return r, done, errUnauthenticated
	}
	ctx := context.WithValue(r.Context(), principalKey{}, p)
	if p.ended != nil {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		stop := context.AfterFunc(p.ended, func() { cancel(errTokenEnded) })
		done = func() { stop(); cancel(nil) }
	}
	r = r.WithContext(ctx)
	if !ok {
		return r, done, nil
	}
	return r, done, c.gate(r, p)
}

// refuse answers a request authenticate refused.
func refuse(w http.ResponseWriter, e *authError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="execbox"`)
	}
	writeAPIError(w, e.err, e.status)
}

// principal returns the principal of r's bearer token.
func (k *keyring) principal(r *http.Request) (Principal, bool) {
	if k.open {
		return Principal{Admin: true}, true
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return Principal{}, false
	}
	// Hashing first makes the comparison constant-time in the length too.
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	found := -1
	for i := range k.keys {
		if subtle.ConstantTimeCompare(sum[:], k.keys[i].SHA256[:]) == 1 {
			found = i
		}
	}
	if found >= 0 {
		return Principal{Tenant: k.keys[found].Name, Admin: k.keys[found].Admin}, true
	}
	return k.sandboxPrincipal(sum)
}

// adminRoutes are the routes only admins may use: the image store is
// shared by every tenant (a pull, remove or prune, or a commit naming a
// reference, changes what all of them get), and the metrics count every
// tenant's sandboxes. A pool's status is the admin's too: its template's
// env may hold secrets, and its counts tell of other tenants' takes
// (tenants take from a pool by a name they are given).
var adminRoutes = map[string]bool{
	"GET /metrics":                        true,
	"GET /v1/pools":                       true,
	"GET /v1/pools/{pool}":                true,
	"POST /v1/pools":                      true,
	"DELETE /v1/pools/{pool}":             true,
	"GET /v1/images":                      true,
	"POST /v1/images/pull":                true,
	"POST /v1/images/remove":              true,
	"POST /v1/images/prune":               true,
	"POST /v1/sandboxes/{sandbox}/commit": true,
}

// gate refuses the routes p may not use, by the pattern r matches.
// Which sandbox is p's to reach is checked by Server.visible.
func (c *core) gate(r *http.Request, p Principal) *authError {
	if p.Admin {
		return nil
	}
	_, pattern := c.mux.Handler(r)
	switch {
	case p.Sandbox != "" && !sandboxTokenRoutes[pattern]:
		return &authError{http.StatusForbidden, &api.Error{Code: api.CodePermissionDenied,
			Message: "a sandbox token reaches only its sandbox's own endpoints (not " + r.Method + " " + r.URL.Path + ")"}}
	case adminRoutes[pattern]:
		return &authError{http.StatusForbidden, &api.Error{Code: api.CodePermissionDenied,
			Message: r.Method + " " + r.URL.Path + " needs an admin key: the image store, the pools and the metrics are every tenant's"}}
	}
	return nil
}

// tenancy is a Server's record of who owns what. Its fields are guarded
// by Server.mu.
type tenancy struct {
	// owners maps the IDs of live sandboxes, and of deleted ones still
	// remembered (Server.gone), to their owner's name.
	owners map[string]string
	// pending counts the creates in progress of each tenant.
	pending map[string]int64
	// opts are the Options of each key with maximums of its own.
	opts map[string]*Options
}

// setupTenants checks opts.Keys, derives each key's Options, and lets
// the keyring find live sandboxes for sandbox tokens.
func (s *Server) setupTenants() error {
	if err := checkKeys(s.opts); err != nil {
		return err
	}
	s.tenancy = tenancy{owners: map[string]string{}, pending: map[string]int64{}, opts: map[string]*Options{}}
	for _, k := range s.keys.keys {
		if k.Max.Limits == (execbox.Limits{}) {
			continue
		}
		o := s.opts
		o.Max.Limits = k.Max.Limits.Merge(s.opts.Max.Limits)
		s.tenancy.opts[k.Name] = &o
	}
	s.keys.live = func(id string) (string, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, ok := s.sandboxes[id]
		return s.tenancy.owners[id], ok
	}
	return nil
}

// checkKeys refuses keys without a valid name, with a name or hash
// given twice, or with maximums over the server's, naming the key by its
// index and name.
func checkKeys(opts Options) error {
	var errs []error
	names := map[string]int{}
	sums := map[[sha256.Size]byte]int{}
	if opts.Token != "" {
		names[AdminName] = -1
		sums[sha256.Sum256([]byte(opts.Token))] = -1
	}
	for i, k := range opts.Keys {
		field := fmt.Sprintf("keys[%d]", i)
		fail := func(f, format string, args ...any) {
			errs = append(errs, execbox.Invalid(field+f, "key %q: "+format, append([]any{k.Name}, args...)...))
		}
		if !validID(k.Name) {
			fail(".name", "must be 1 to 64 of A-Z a-z 0-9 . _ -")
		}
		if j, dup := names[k.Name]; dup {
			fail(".name", "%s", firstUse(j, "the name"))
		}
		if j, dup := sums[k.SHA256]; dup {
			fail(".key", "%s", firstUse(j, "the same key"))
		}
		if k.SHA256 == ([sha256.Size]byte{}) {
			fail(".key", "is required")
		}
		names[k.Name], sums[k.SHA256] = i, i
		if k.Max.Sandboxes < 0 {
			fail(".max.sandboxes", "must not be negative")
		}
		if err := opts.Max.checkLimits(field+".max.limits.", k.Max.Limits); err != nil {
			errs = append(errs, err)
		}
		if k.Max.ResultMemory < 0 {
			fail(".max.result_memory", "must not be negative")
		}
		if max := opts.Max.ResultMemory; max > 0 && k.Max.ResultMemory > max {
			errs = append(errs, over(field+".max.result_memory", k.Max.ResultMemory, max))
		}
		if max := opts.Max.Sandboxes; max > 0 && k.Max.Sandboxes > max {
			errs = append(errs, over(field+".max.sandboxes", k.Max.Sandboxes, max))
		}
	}
	return errors.Join(errs...)
}

func firstUse(j int, what string) string {
	if j < 0 {
		return what + " of the server's token (Options.Token)"
	}
	return fmt.Sprintf("%s as keys[%d]", what, j)
}

// optionsFor returns the Options of r's principal: its key's maximums,
// or the server's.
func (s *Server) optionsFor(r *http.Request) *Options {
	if o, ok := s.tenancy.opts[principal(r).Tenant]; ok {
		return o
	}
	return &s.opts
}

// visible reports whether r's principal may reach sandbox id (live or
// remembered as deleted); s.mu is held. Others get exactly what an
// unknown ID gets, so IDs do not leak across tenants. A sandbox of no
// known owner is an admin's alone.
func (s *Server) visible(r *http.Request, id string) bool {
	p := principal(r)
	switch {
	case p.Admin:
		return true
	case p.Sandbox != "":
		return p.Sandbox == id
	}
	owner, ok := s.tenancy.owners[id]
	if !ok {
		owner, ok = s.restart.lostOwner(id)
	}
	return ok && owner == p.Tenant
}

// noSandbox is the error of an unknown sandbox ID.
func noSandbox(id string) error {
	return &execbox.FieldError{Field: "sandbox", Problem: "no sandbox " + strconv.Quote(id), Kind: execbox.ErrNotFound}
}

// reservation is a create counted against its tenant's maximum until
// the sandbox is held (adopt) or the create fails (release).
type reservation struct {
	s      *Server
	tenant string
	done   bool
}

// reserve counts a create by r's principal, or fails when its key's
// maximum of live sandboxes is reached; s.mu is held.
func (s *Server) reserve(r *http.Request) (*reservation, error) {
	p := principal(r)
	if p.Sandbox != "" {
		return nil, fmt.Errorf("a sandbox token cannot create sandboxes: %w", execbox.ErrPermission)
	}
	var max int64
	for _, k := range s.keys.keys {
		if k.Name == p.Tenant {
			max = k.Max.Sandboxes
		}
	}
	if max > 0 {
		n := s.tenancy.pending[p.Tenant]
		for _, sb := range s.sandboxes {
			if sb.info.Owner == p.Tenant {
				n++
			}
		}
		if n >= max {
			return nil, fmt.Errorf("sandboxes of key %q: its maximum of %d is reached: %w", p.Tenant, max, execbox.ErrResourceExhausted)
		}
	}
	s.tenancy.pending[p.Tenant]++
	return &reservation{s: s, tenant: p.Tenant}, nil
}

// adopt makes sb its tenant's, as the create ends well; s.mu is held.
func (res *reservation) adopt(sb *sandbox) {
	sb.info.Owner = res.tenant
	res.s.tenancy.owners[sb.info.ID] = res.tenant
	res.settle()
}

// settle ends the count of the create in progress; s.mu is held.
func (res *reservation) settle() {
	if !res.done {
		res.done = true
		if res.s.tenancy.pending[res.tenant]--; res.s.tenancy.pending[res.tenant] <= 0 {
			delete(res.s.tenancy.pending, res.tenant)
		}
	}
}

// release settles a create that ended without adopt.
func (res *reservation) release() {
	res.s.mu.Lock()
	res.settle()
	res.s.mu.Unlock()
}

// disown forgets the owner of id, when the server forgets id; s.mu is
// held.
func (s *Server) disown(id string) { delete(s.tenancy.owners, id) }
