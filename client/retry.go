package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/execbox/execbox"
)

// Retry says how a Client retries an idempotent call that failed for a
// reason a later try may not meet: the server unreachable (connection
// refused or reset, a restart under way) or answering 502 or 503
// (a proxy with no backend, a server shutting down). Waits grow
// exponentially with full jitter (a random wait in [0, min(Max,
// Base·2ⁿ)), so that many clients of one restarted server do not retry
// in step), bounded by Attempts, Budget and the call's context.
//
// Idempotent calls, retried: GET and HEAD; PUT of a file's content (the
// same bytes again; a tar upload streamed from a reader cannot be sent
// twice and is not retried); DELETE of a sandbox or session (a repeat
// answers "closed", which Close takes for done). Never retried: POST
// (create, exec, start, stdin, signals: a repeat would run twice), and
// DELETE of a file, whose repeat would answer not_found for a success,
// unless the connection was never made (nothing was sent).
//
// Any call, POST too, is sent again when the server refused it with 429
// (resource_exhausted: a maximum reached, its memory for results in use)
// and a Retry-After, which promises that nothing was done: after the
// wait it asks (at most a minute), within Attempts and Budget, if its
// body can be sent again (not a stream).
type Retry struct {
	// Attempts is the most tries of one call, the first included; 1
	// turns retries off. Zero means DefaultRetry's.
	Attempts int
	// Base is the bound of the first wait; zero means DefaultRetry's.
	Base time.Duration
	// Max bounds each wait; zero means DefaultRetry's.
	Max time.Duration
	// Budget bounds the time from a call's first try to the start of
	// its last: no retry starts after it. Zero means DefaultRetry's.
	Budget time.Duration
}

// DefaultRetry is the retry of a Client without WithRetry.
var DefaultRetry = Retry{Attempts: 5, Base: 100 * time.Millisecond, Max: 2 * time.Second, Budget: 15 * time.Second}

// WithRetry sets how the client retries idempotent calls; its zero
// fields take DefaultRetry's. Retry{Attempts: 1} turns retries off.
func WithRetry(r Retry) Option { return func(o *options) { o.retry = &r } }

// withDefaults fills r's zero fields from DefaultRetry; a negative field
// is an error naming it.
func (r *Retry) withDefaults() (Retry, error) {
	out := DefaultRetry
	if r == nil {
		return out, nil
	}
	var errs []error
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"retry.attempts", int64(r.Attempts)},
		{"retry.base", int64(r.Base)},
		{"retry.max", int64(r.Max)},
		{"retry.budget", int64(r.Budget)},
	} {
		if f.v < 0 {
			errs = append(errs, execbox.Invalid(f.name, "must not be negative (0: the default)"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Retry{}, err
	}
	if r.Attempts > 0 {
		out.Attempts = r.Attempts
	}
	if r.Base > 0 {
		out.Base = r.Base
	}
	if r.Max > 0 {
		out.Max = r.Max
	}
	if r.Budget > 0 {
		out.Budget = r.Budget
	}
	return out, nil
}

// wait is the pause before retry n (from 0): full jitter.
func (r Retry) wait(n int) time.Duration {
	ceil := r.Max
	if n < 30 && r.Base<<n > 0 && r.Base<<n < ceil {
		ceil = r.Base << n
	}
	if ceil <= 0 {
		return 0
	}
	return rand.N(ceil)
}

// do sends req, retrying it as c.retry says when it is idempotent, or,
// whatever its method, when the server refused it with 429 and
// Retry-After (nothing was done) and its body can be sent again.
func (c *Client) do(ctx context.Context, req request) (*http.Response, error) {
	how := retryOf(req)
	_, resendable := req.body.(*bytes.Reader)
	resendable = resendable || req.body == nil
	if (how == never && !resendable) || c.retry.Attempts <= 1 {
		return c.send(ctx, req)
	}
	var snap bytes.Reader
	if br, ok := req.body.(*bytes.Reader); ok {
		snap = *br
	}
	start := time.Now()
	for n := 0; ; n++ {
		if req.body != nil {
			b := snap
			req.body = &b
		}
		resp, err := c.send(ctx, req)
		if err == nil || ctx.Err() != nil || n+1 >= c.retry.Attempts {
			return resp, err
		}
		var d time.Duration
		var refused *refusedError
		switch {
		case errors.As(err, &refused) && resendable:
			d = refused.after
		case how == never || !errors.Is(err, execbox.ErrUnavailable) || (how == unsent && !dialFailed(err)):
			return resp, err
		default:
			d = c.retry.wait(n)
		}
		if time.Since(start)+d > c.retry.Budget {
			return nil, err
		}
		c.log.Debug("retrying", "method", req.method, "path", req.path, "attempt", n+2, "wait", d, "err", err)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (after: %v)", ctx.Err(), err)
		}
	}
}

// refusedError is a 429 whose Retry-After says when to try again: the
// server did nothing, so any call may be sent again then.
type refusedError struct {
	err   error
	after time.Duration
}

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// retryAfter reads a 429's Retry-After, in seconds (an HTTP date is
// taken too), bounded by maxRetryAfter.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	v := resp.Header.Get("Retry-After")
	if resp.StatusCode != http.StatusTooManyRequests || v == "" {
		return 0, false
	}
	var d time.Duration
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		d = time.Duration(min(s, int(maxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(time.Until(t), 0)
	} else {
		return 0, false
	}
	return min(d, maxRetryAfter), true
}

// maxRetryAfter bounds the wait a server's Retry-After may ask.
const maxRetryAfter = time.Minute

// retryHow is when a request may be sent again.
type retryHow int

const (
	never  retryHow = iota
	unsent          // only if the connection was never made
	always          // on any transport error, 502 or 503
)

// retryOf says when req may be sent again (see Retry).
func retryOf(req request) retryHow {
	switch req.method {
	case http.MethodGet, http.MethodHead:
		return always
	case http.MethodPut:
		if _, ok := req.body.(*bytes.Reader); ok || req.body == nil {
			return always
		}
	case http.MethodDelete:
		if strings.HasSuffix(req.path, "/files") {
			return unsent
		}
		return always
	}
	return never
}

// dialFailed reports whether err is a failure to connect: the request
// never left.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
