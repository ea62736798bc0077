package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// Defaults of Lifetimes.
const (
	DefaultReapInterval  = time.Second
	DefaultProbeInterval = 10 * time.Second
)

// Lifetimes are a Server's defaults and maximums of the lifetimes of
// sandboxes (execbox.Spec.Timeout and IdleTimeout), which the Server
// enforces: a reaper closes each sandbox whose lifetime or idle timeout
// has run out, and one whose boundary is lost. The zero value sets no
// lifetime: a sandbox lives until it is deleted, as an embedder that
// closes its own sandboxes expects; execbox serve sets safe ones (its
// server.sandbox_* keys).
//
// A spec asking more than a maximum is invalid_argument naming the
// field; one asking none gets the default, or the maximum when the
// default is none or over it, so that no sandbox outlives a maximum.
type Lifetimes struct {
	// Timeout is the lifetime of a sandbox whose spec asks none.
	Timeout time.Duration
	// MaxTimeout bounds a spec's timeout, and every extension of it
	// (POST /v1/sandboxes/{id}/timeout): no sandbox lives longer than
	// this from its creation.
	MaxTimeout time.Duration
	// IdleTimeout is the idle timeout of a sandbox whose spec asks none.
	IdleTimeout time.Duration
	// MaxIdleTimeout bounds a spec's idle timeout.
	MaxIdleTimeout time.Duration
	// ReapInterval is how often the reaper looks for sandboxes to end: a
	// sandbox ends at most this long after its deadline. Zero means
	// DefaultReapInterval.
	ReapInterval time.Duration
	// ProbeInterval is how often the reaper checks that each sandbox's
	// boundary is alive (a cheap call through it); zero means
	// DefaultProbeInterval, negative never. A sandbox whose check fails
	// with ErrUnavailable is marked failed and closed. A call of a client
	// failing that way triggers the same check at once.
	ProbeInterval time.Duration
}

// resolve returns the lifetime and idle timeout of a sandbox made from
// spec, bounded by l, naming the spec's field when it asks too much.
func (l *Lifetimes) resolve(spec *execbox.Spec) (timeout, idle time.Duration, err error) {
	timeout, err1 := bounded("timeout", spec.Timeout, l.Timeout, l.MaxTimeout)
	idle, err2 := bounded("idle_timeout", spec.IdleTimeout, l.IdleTimeout, l.MaxIdleTimeout)
	return timeout, idle, errors.Join(err1, err2)
}

// bounded is asked (zero: def; zero def: none) within max (zero: none).
func bounded(field string, asked, def, max time.Duration) (time.Duration, error) {
	if asked < 0 {
		return 0, execbox.Invalid(field, "must not be negative")
	}
	if max > 0 && asked > max {
		return 0, over(field, asked, max)
	}
	if asked == 0 {
		asked = def
	}
	if max > 0 && (asked == 0 || asked > max) {
		asked = max
	}
	return asked, nil
}

// life is the lifetime of a Server's sandbox. Its times are atomic
// (Unix nanoseconds), so that a call touching the sandbox costs an atomic
// store, and the reaper reads them without the sandbox's lock.
type life struct {
	idle    time.Duration // zero: none
	expires atomic.Int64  // zero: none
	active  atomic.Int64  // the last activity
	// check asks the server to check the sandbox's boundary (see
	// Server.probe), after a call failed as if it were lost; the channel
	// closes when the check is done.
	check func() <-chan struct{}

	mu      sync.Mutex
	probing chan struct{} // a liveness check under way; nil: none
	ended   error         // closed, saying why, once the server ended it
}

// setEnded records that the sandbox ended, with the error of calls on
// it (endedError).
func (l *life) setEnded(err error) {
	l.mu.Lock()
	l.ended = err
	l.mu.Unlock()
}

func (l *life) endedErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended
}

func newLife(created time.Time, timeout, idle time.Duration) *life {
	l := &life{idle: idle}
	if timeout > 0 {
		l.expires.Store(unixNano(created.Add(timeout)))
	}
	l.active.Store(created.UnixNano())
	return l
}

// lastNano is the latest time Unix nanoseconds hold (in 2262).
var lastNano = time.Unix(0, math.MaxInt64)

// unixNano is t in Unix nanoseconds, a time past 2262 (a lifetime of
// centuries, on a server with no maximum) clamped to the latest they
// hold, where UnixNano would overflow into the past.
func unixNano(t time.Time) int64 {
	if t.After(lastNano) {
		return math.MaxInt64
	}
	return t.UnixNano()
}

// touch records activity now. It does nothing for an agent's sandbox,
// which has no life.
func (s *sandbox) touch() {
	if s.life != nil {
		s.life.active.Store(time.Now().UnixNano())
	}
}

// touches reports whether a call of the per-sandbox route is activity:
// every one but reading the sandbox's description (info, health), so
// that a dashboard polling them keeps no sandbox alive.
func touches(method, path string) bool {
	return !(method == "GET" && (path == "info" || path == "health"))
}

// sawError checks at once the boundary of a sandbox whose call failed
// with ErrUnavailable, as a call through a lost boundary does, and
// returns the error to answer: closed, saying why, when the check found
// the boundary lost (so that this call, like every later one, answers
// closed rather than unavailable), else err. It waits for the check
// while ctx (the request's) lives.
func (s *sandbox) sawError(ctx context.Context, err error) error {
	if s.life == nil || s.life.check == nil {
		return err
	}
	if ended := s.life.endedErr(); ended != nil && (unavailable(err) || errors.Is(err, execbox.ErrClosed)) {
		return ended // the runtime's own "closed" does not say why
	}
	if !unavailable(err) {
		return err
	}
	// Twice: a check under way, which this one joins, may have begun
	// before the boundary was lost.
	for range 2 {
		select {
		case <-s.life.check():
		case <-ctx.Done():
			return err
		}
		if ended := s.life.endedErr(); ended != nil {
			return ended
		}
	}
	return err
}

// liveInfo is the sandbox's description now: with its life, for a
// Server's sandbox.
func (s *sandbox) liveInfo() api.SandboxInfo {
	info := s.info
	if s.life == nil {
		return info
	}
	info.State = api.StateRunning
	if e := s.life.expires.Load(); e != 0 {
		info.ExpiresAt = time.Unix(0, e).UTC()
	}
	if s.life.idle > 0 {
		info.IdleTimeoutMS = float64(s.life.idle) / 1e6
	}
	info.LastActiveAt = time.Unix(0, s.life.active.Load()).UTC()
	return info
}

// endedInfo is the last description of a sandbox that ended now, for
// reason; detail says why, for people (empty: endDetail's words).
func (s *sandbox) endedInfo(reason api.EndReason, detail string) api.SandboxInfo {
	info := s.liveInfo()
	info.State = api.StateClosed
	if reason == api.EndFailed {
		info.State = api.StateFailed
	}
	info.EndedAt = time.Now().UTC()
	info.EndReason = reason
	info.EndDetail = detail
	if detail == "" {
		info.EndDetail = endDetail(info, reason)
	}
	return info
}

// endedError is the error of a call on a sandbox that ended: closed,
// saying when and why.
func endedError(info api.SandboxInfo) error {
	verb := "ended"
	if info.State == api.StateFailed {
		verb = "failed"
	}
	return fmt.Errorf("sandbox %s %s at %s: %s: %w", info.ID, verb,
		info.EndedAt.Format(time.RFC3339), info.EndDetail, execbox.ErrClosed)
}

// endDetail says why a sandbox ended, for its last state and for the
// errors of calls on it.
func endDetail(info api.SandboxInfo, reason api.EndReason) string {
	switch reason {
	case api.EndDeleted:
		return "it was deleted"
	case api.EndTimeout:
		return fmt.Sprintf("its lifetime of %s ran out (spec timeout_ms, or POST /v1/sandboxes/%s/timeout to extend it)",
			info.ExpiresAt.Sub(info.CreatedAt).Round(time.Millisecond), info.ID)
	case api.EndIdle:
		return fmt.Sprintf("it was idle for its idle timeout of %s (spec idle_timeout_ms): no call, process or session since %s",
			time.Duration(info.IdleTimeoutMS*1e6).Round(time.Millisecond), info.LastActiveAt.Format(time.RFC3339))
	case api.EndShutdown:
		return "the server shut down"
	}
	return string(reason)
}
