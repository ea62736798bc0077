package api

import "time"

// CreateTokenRequest is the body of POST /v1/sandboxes/{id}/tokens: a
// token for one sandbox, to hand to a client trusted with that sandbox
// only. The body may be empty.
type CreateTokenRequest struct {
	// TTLMS is the token's lifetime in milliseconds; 0 means until the
	// sandbox ends or the token is revoked. Negative is invalid.
	TTLMS int64 `json:"ttl_ms,omitempty"`
}

// SandboxToken describes a sandbox token. Token, the secret, is only in
// the answer to its creation: the server keeps its SHA-256 alone.
type SandboxToken struct {
	// ID names the token for listing and revoking; it is no secret.
	ID string `json:"id"`
	// Token is the bearer token (only when created).
	Token     string    `json:"token,omitempty"`
	Sandbox   string    `json:"sandbox"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the token stops working; absent for none.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// SandboxTokenList is the body of GET /v1/sandboxes/{id}/tokens.
type SandboxTokenList struct {
	Tokens []SandboxToken `json:"tokens"`
}
