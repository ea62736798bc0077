package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// CreateToken asks the server for a token for this sandbox alone, to
// hand to a client trusted with it and nothing else:
// client.New(url, client.WithToken(tok.Token)) then Sandbox(ctx, id)
// reaches this sandbox's endpoints (exec, processes, sessions, files,
// its info) and no others; it cannot delete the sandbox, so such a
// client's Sandbox.Close fails with ErrPermission and leaves it running.
// ttl 0 means until the sandbox ends or the token is revoked. The
// sandbox's owner or an admin key may ask; an agent cannot
// (ErrUnsupported).
func (s *Sandbox) CreateToken(ctx context.Context, ttl time.Duration) (api.SandboxToken, error) {
	var tok api.SandboxToken
	if ttl < 0 {
		return tok, execbox.Invalid("ttl", "must not be negative")
	}
	ms := ttl.Milliseconds()
	if ttl > 0 && ms == 0 {
		ms = 1 // not 0, which would mean no expiry
	}
	err := s.c.doJSON(ctx, http.MethodPost, s.prefix+"tokens", nil, api.CreateTokenRequest{TTLMS: ms}, &tok)
	return tok, err
}

// Tokens lists this sandbox's live tokens, without their secrets.
func (s *Sandbox) Tokens(ctx context.Context) ([]api.SandboxToken, error) {
	var l api.SandboxTokenList
	err := s.c.doJSON(ctx, http.MethodGet, s.prefix+"tokens", nil, nil, &l)
	return l.Tokens, err
}

// RevokeToken ends the token named id (api.SandboxToken.ID) at once.
func (s *Sandbox) RevokeToken(ctx context.Context, id string) error {
	return s.c.doJSON(ctx, http.MethodDelete, s.prefix+"tokens/"+url.PathEscape(id), nil, nil, nil)
}
