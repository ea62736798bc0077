package api

import (
	"errors"
	"time"

	"github.com/execbox/execbox"
)

// PoolFallback says what taking from an empty warm pool does.
type PoolFallback string

// Fallbacks of a Pool.
const (
	// FallbackCreate makes a fresh sandbox from the template (the default).
	FallbackCreate PoolFallback = "create"
	// FallbackFail answers resource_exhausted.
	FallbackFail PoolFallback = "fail"
)

// Pool defines a warm pool: the body of POST /v1/pools, and an entry of
// server.pools in execbox.yaml. Its sandboxes are made ahead of demand
// from Spec on Runtime, and handed out by a create request naming the
// pool (Spec.Pool).
type Pool struct {
	// Name names the pool: 1-64 of A-Z a-z 0-9 . _ -.
	Name string `json:"name"`
	// Runtime is the server's runtime that makes the sandboxes; empty
	// means the server's default.
	Runtime string `json:"runtime,omitempty"`
	// Spec is the template. Its Env is fixed in the warm sandboxes; what
	// varies per caller (env, labels, files) is bound when one is taken.
	// Pool must be empty.
	Spec Spec `json:"spec"`
	// Initial is how many sandboxes are made when the pool starts, if
	// more than MinIdle (to absorb a burst at start).
	Initial int64 `json:"initial,omitempty"`
	// MinIdle is how many idle sandboxes the pool keeps ready, refilled
	// in the background as they are taken.
	MinIdle int64 `json:"min_idle,omitempty"`
	// Max bounds the sandboxes of the pool at once: idle, being made, and
	// handed out and not yet deleted (fresh ones of the fallback too).
	// Zero means no bound but the server's.
	Max int64 `json:"max,omitempty"`
	// Fallback is what a take from an empty pool does: "create" (the
	// default) or "fail".
	Fallback PoolFallback `json:"fallback,omitempty"`
}

// Validate reports every problem of p at once, naming the fields as on
// the wire ("min_idle", "spec.limits.cpu_time_ms"). It returns the
// template as an execbox.Spec.
func (p *Pool) Validate() (execbox.Spec, error) {
	var errs []error
	if !execbox.ValidPoolName(p.Name) {
		errs = append(errs, execbox.Invalid("name", "%q is not a pool name (1-64 of A-Z a-z 0-9 . _ -)", p.Name))
	}
	for _, n := range []struct {
		field string
		v     int64
	}{{"initial", p.Initial}, {"min_idle", p.MinIdle}, {"max", p.Max}} {
		if n.v < 0 {
			errs = append(errs, execbox.Invalid(n.field, "must not be negative"))
		}
	}
	if p.Max > 0 && p.MinIdle > p.Max {
		errs = append(errs, execbox.Invalid("min_idle", "%d is more than max (%d)", p.MinIdle, p.Max))
	}
	if p.Max > 0 && p.Initial > p.Max {
		errs = append(errs, execbox.Invalid("initial", "%d is more than max (%d)", p.Initial, p.Max))
	}
	if p.MinIdle == 0 && p.Initial == 0 && p.Fallback == FallbackFail {
		errs = append(errs, execbox.Invalid("min_idle", "must be at least 1 with fallback fail (the pool would never hand out a sandbox)"))
	}
	switch p.Fallback {
	case "", FallbackCreate, FallbackFail:
	default:
		errs = append(errs, execbox.Invalid("fallback", "unknown fallback %q (want create or fail)", p.Fallback))
	}
	if p.Spec.Pool != "" {
		errs = append(errs, execbox.Invalid("spec.pool", "a pool's template cannot name a pool"))
	}
	spec, err := p.Spec.Spec()
	if err == nil {
		err = spec.Validate()
	}
	errs = append(errs, execbox.MapFieldErrors(err, func(fe execbox.FieldError) execbox.FieldError {
		fe.Field = "spec." + WireField(fe.Field)
		return fe
	}))
	return spec, errors.Join(errs...)
}

// PoolStatus is a pool's definition and counts: the body of GET
// /v1/pools/{name} and POST /v1/pools.
type PoolStatus struct {
	Pool
	// Idle sandboxes are ready to be taken; Creating are being made;
	// HandedOut were taken (or made by the fallback) and not yet deleted.
	Idle      int64 `json:"idle"`
	Creating  int64 `json:"creating"`
	HandedOut int64 `json:"handed_out"`
	// Hits and Misses count takes served warm and not (made by the
	// fallback, or refused).
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
	// Failures counts the background creates that failed in a row; the
	// next is tried at RetryAt (exponential backoff with jitter).
	Failures int64      `json:"failures,omitempty"`
	RetryAt  *time.Time `json:"retry_at,omitempty"`
	// LastError is the last failure of a background create, at
	// LastErrorAt; it stays after later successes.
	LastError   *Error     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

// PoolList is the body of GET /v1/pools, ordered by name.
type PoolList struct {
	Pools []PoolStatus `json:"pools"`
}
