package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// maxSandboxTokens bounds the live tokens of one sandbox.
const maxSandboxTokens = 64

// sandboxToken is a bearer token for one sandbox: what its owner hands
// to a client trusted with that sandbox alone (OpenHands gives each
// session its own key). It dies with the sandbox, at its expiry, or when
// revoked.
type sandboxToken struct {
	info api.SandboxToken // Token empty: the server keeps the hash alone
	sum  [sha256.Size]byte
	// ended is done when the token ends: revoked, past its expiry, or
	// dropped with its sandbox. The requests it authenticated end with
	// it (authenticate), so that a request that lives long (an exec
	// whose stdin streams, an event stream) does not outlive the token.
	// Nil for none (tests).
	ended context.Context
	end   context.CancelFunc
}

// errTokenEnded is the cause of the requests a sandbox token made
// ending when the token does.
var errTokenEnded = fmt.Errorf("the sandbox token was revoked or expired: %w", execbox.ErrPermission)

// drop forgets t and ends the requests it made; k.mu is held.
func (k *keyring) drop(t *sandboxToken) {
	delete(k.tokens, t.sum)
	if t.end != nil {
		t.end()
	}
}

// sandboxTokenRoutes are the routes a sandbox token may use, those of
// its own sandbox: its endpoints (exec, processes, sessions, files,
// snapshot) and GET of its info. Not: create, list, delete (the owner
// decides when the sandbox ends), tokens (a token cannot mint tokens),
// commit, images, runtimes.
var sandboxTokenRoutes = func() map[string]bool {
	m := map[string]bool{"GET /v1/sandboxes/{sandbox}": true}
	for _, rt := range sandboxRoutes {
		m[rt.method+" /v1/sandboxes/{sandbox}/"+rt.path] = true
	}
	return m
}()

func (s *Server) registerTokenRoutes() {
	s.mux.HandleFunc("POST /v1/sandboxes/{sandbox}/tokens", s.createToken)
	s.mux.HandleFunc("GET /v1/sandboxes/{sandbox}/tokens", s.listTokens)
	s.mux.HandleFunc("DELETE /v1/sandboxes/{sandbox}/tokens/{token}", s.revokeToken)
}

// sandboxPrincipal returns the principal of the sandbox token whose
// SHA-256 is sum. A token past its expiry, or whose sandbox is gone, is
// dropped.
func (k *keyring) sandboxPrincipal(sum [sha256.Size]byte) (Principal, bool) {
	if k.live == nil {
		return Principal{}, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	t, ok := k.tokens[sum]
	if !ok {
		return Principal{}, false
	}
	owner, live := k.live(t.info.Sandbox)
	if !live || expired(t, time.Now()) {
		k.drop(t)
		return Principal{}, false
	}
	return Principal{Tenant: owner, Sandbox: t.info.Sandbox, ended: t.ended}, true
}

func expired(t *sandboxToken, now time.Time) bool {
	return !t.info.ExpiresAt.IsZero() && !now.Before(t.info.ExpiresAt)
}

// prune drops the tokens that expired or whose sandbox is gone, and
// returns those of sandbox id; k.mu is held.
func (k *keyring) prune(id string) []*sandboxToken {
	now := time.Now()
	var out []*sandboxToken
	for _, t := range k.tokens {
		if _, live := k.live(t.info.Sandbox); !live || expired(t, now) {
			k.drop(t)
		} else if t.info.Sandbox == id {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *sandboxToken) int { return a.info.CreatedAt.Compare(b.info.CreatedAt) })
	return out
}

// createToken makes a sandbox token: POST /v1/sandboxes/{id}/tokens
// {"ttl_ms"}, by the sandbox's owner or an admin.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	sb, err := s.lookup(r)
	var req api.CreateTokenRequest
	if err == nil {
		err = readJSON(r, s.opts.MaxJSONBody, &req, false)
	}
	switch {
	case err != nil:
	case req.TTLMS < 0:
		err = wireInvalid("ttl_ms", "must not be negative")
	case req.TTLMS > math.MaxInt64/int64(time.Millisecond):
		// Its nanoseconds would overflow into a token born expired.
		err = wireInvalid("ttl_ms", "%d is out of range (at most %d)", req.TTLMS, math.MaxInt64/int64(time.Millisecond))
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret) // crypto/rand.Read never fails (Go 1.24)
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	tok := hex.EncodeToString(secret)
	t := &sandboxToken{sum: sha256.Sum256([]byte(tok)), info: api.SandboxToken{
		ID: "tok-" + hex.EncodeToString(id), Sandbox: sb.info.ID, CreatedAt: time.Now().UTC(),
	}}
	if req.TTLMS > 0 {
		t.info.ExpiresAt = t.info.CreatedAt.Add(time.Duration(req.TTLMS) * time.Millisecond)
	}
	k := s.keys
	k.mu.Lock()
	if n := len(k.prune(sb.info.ID)); n >= maxSandboxTokens {
		k.mu.Unlock()
		writeError(w, r, s.log, fmt.Errorf("tokens of sandbox %s: the maximum of %d is reached: %w", sb.info.ID, maxSandboxTokens, execbox.ErrResourceExhausted))
		return
	}
	if t.info.ExpiresAt.IsZero() {
		t.ended, t.end = context.WithCancel(context.Background())
	} else {
		t.ended, t.end = context.WithDeadline(context.Background(), t.info.ExpiresAt)
	}
	k.tokens[t.sum] = t
	k.mu.Unlock()
	sb.log.Info("token created", "token", t.info.ID, "expires_at", t.info.ExpiresAt)
	out := t.info
	out.Token = tok
	w.Header().Set("Location", r.URL.Path+"/"+t.info.ID)
	writeJSON(w, http.StatusCreated, out)
}

// listTokens lists a sandbox's live tokens, without their secrets:
// GET /v1/sandboxes/{id}/tokens.
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	sb, err := s.lookup(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	k := s.keys
	k.mu.Lock()
	out := api.SandboxTokenList{Tokens: []api.SandboxToken{}}
	for _, t := range k.prune(sb.info.ID) {
		out.Tokens = append(out.Tokens, t.info)
	}
	k.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// revokeToken ends a sandbox token at once: DELETE
// /v1/sandboxes/{id}/tokens/{token}, by its ID.
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	sb, err := s.lookup(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	id := r.PathValue("token")
	k := s.keys
	k.mu.Lock()
	found := false
	for _, t := range k.prune(sb.info.ID) {
		if t.info.ID == id {
			k.drop(t)
			found = true
		}
	}
	k.mu.Unlock()
	if !found {
		writeError(w, r, s.log, &execbox.FieldError{Field: "token", Kind: execbox.ErrNotFound,
			Problem: "sandbox " + sb.info.ID + " has no token " + strconv.Quote(strings.TrimSpace(id))})
		return
	}
	sb.log.Info("token revoked", "token", id)
	w.WriteHeader(http.StatusNoContent)
}
