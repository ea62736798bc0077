package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// Warm pools: sandboxes made ahead of demand from a template, so that a
// create naming the pool costs a map lookup instead of a boundary's
// set-up. A sandbox leaves its pool when it is taken and never comes
// back: deleting it destroys it, so nothing a caller did reaches the
// next caller (or tenant).

// Refill bounds.
const (
	// poolParallel is how many background creates a pool runs at once
	// (one while its creates are failing).
	poolParallel = 4
	// poolBackoffMin and poolBackoffMax bound the wait after a failed
	// background create; it doubles with each failure in a row.
	poolBackoffMin = 100 * time.Millisecond
	poolBackoffMax = 30 * time.Second
	// poolRefillDelay is how long after a take its refill starts. Takes
	// come in bursts, and a create can stall the whole server for a
	// moment (the sandbox runtime forks it, copying its page tables):
	// the takes of a burst are answered first. It counts from the
	// burst's first take, so steady takes still refill every delay.
	poolRefillDelay = 5 * time.Millisecond
)

// pool is one warm pool: its idle sandboxes and the goroutine keeping
// them filled.
type pool struct {
	def      api.Pool        // as defined, Runtime filled in
	rt       execbox.Runtime // makes the sandboxes
	template execbox.Spec    // what Create is given (server maximums applied)
	asked    execbox.Spec    // the template as defined, to compare takes with
	log      *slog.Logger

	ctx    context.Context // ends with close: stops creates in flight
	cancel context.CancelFunc
	wake   chan struct{} // a take or release: look at the counts again
	done   chan struct{} // the fill goroutine ended

	mu        sync.Mutex
	closed    bool
	primed    bool // Initial was reached once; MinIdle rules from then on
	idle      []execbox.Sandbox
	creating  int64
	out       int64 // handed out, not yet deleted
	hits      int64
	misses    int64
	failures  int64 // background creates failed in a row
	retryAt   time.Time
	refillAt  time.Time // after a take: refill no sooner; zero: now
	lastErr   error
	lastErrAt time.Time
}

func newPool(def api.Pool, rt execbox.Runtime, asked, template execbox.Spec, log *slog.Logger) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{
		def: def, rt: rt, asked: asked, template: template,
		log: log.With("pool", def.Name),
		ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	go p.fill()
	return p
}

// poke wakes the fill goroutine without blocking.
func (p *pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// fill keeps the pool at its target until close: it starts creates for
// what is missing, and after a failure waits a backoff before the next.
func (p *pool) fill() {
	defer close(p.done)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: creates in flight close what they made
	results := make(chan error)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		wait := time.Until(p.retryAt)
		if p.failures == 0 {
			wait = time.Until(p.refillAt)
		}
		if wait <= 0 {
			p.refillAt = time.Time{}
			limit := int64(poolParallel)
			if p.failures > 0 {
				limit = 1 // probe with one until a create works again
			}
			for n := p.missing(); n > 0 && p.creating < limit; n-- {
				p.creating++
				wg.Go(func() { p.createOne(results) })
			}
		}
		p.mu.Unlock()
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		case err := <-results:
			p.record(err)
		}
	}
}

// missing is how many more sandboxes the pool should be making now:
// up to its target of idle ones, within Max. p.mu is held.
func (p *pool) missing() int64 {
	target := p.def.MinIdle
	if !p.primed {
		target = max(target, p.def.Initial)
	}
	n := target - int64(len(p.idle)) - p.creating
	if m := p.def.Max; m > 0 {
		n = min(n, m-int64(len(p.idle))-p.creating-p.out)
	}
	return n
}

// createOne makes one sandbox for the pool and reports the outcome to
// fill. A sandbox made after close is closed at once.
func (p *pool) createOne(results chan<- error) {
	sb, err := p.rt.Create(p.ctx, p.template)
	p.mu.Lock()
	p.creating--
	keep := err == nil && !p.closed
	if keep {
		p.idle = append(p.idle, sb)
		if !p.primed && int64(len(p.idle)) >= max(p.def.MinIdle, p.def.Initial) {
			p.primed = true
		}
	}
	p.mu.Unlock()
	if err == nil && !keep {
		if cerr := sb.Close(); cerr != nil {
			p.log.Warn("close a sandbox made after the pool closed", "sandbox", sb.ID(), "error", cerr)
		}
	}
	select {
	case results <- err:
	case <-p.ctx.Done():
	}
}

// record notes a background create's outcome: a failure sets the
// backoff, exponential with jitter, and is logged.
func (p *pool) record(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.failures, p.retryAt = 0, time.Time{}
		return
	}
	if p.closed || p.ctx.Err() != nil {
		return
	}
	p.failures++
	p.lastErr, p.lastErrAt = err, time.Now()
	d := backoff(p.failures)
	p.retryAt = p.lastErrAt.Add(d)
	p.log.Warn("warm pool: create failed", "failures", p.failures, "retry_in", d, "error", err)
}

// backoff is the wait after the n-th failure in a row: poolBackoffMin
// doubled n-1 times, at most poolBackoffMax, the upper half jittered so
// pools failing together do not retry together.
func backoff(n int64) time.Duration {
	d := poolBackoffMax
	if n < 20 {
		d = min(poolBackoffMin<<(n-1), poolBackoffMax)
	}
	return d/2 + rand.N(d/2+1)
}

// errPoolEmpty is the problem of a take from an empty pool that may not
// make one.
func (p *pool) exhausted(why string) error {
	return &execbox.FieldError{Field: "pool", Kind: execbox.ErrResourceExhausted,
		Problem: fmt.Sprintf("pool %q %s", p.def.Name, why)}
}

// take hands out an idle sandbox, or, with the pool empty and fallback
// create, makes one from the template in the caller's time. hit says
// which. Each idle sandbox is handed out once: it leaves p.idle under
// p.mu. The caller pokes the refill after answering, so that the
// refill's create does not compete with the answer for the CPU.
func (p *pool) take(ctx context.Context) (sb execbox.Sandbox, hit bool, err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false, &execbox.FieldError{Field: "pool", Kind: execbox.ErrNotFound,
			Problem: fmt.Sprintf("pool %q was deleted", p.def.Name)}
	}
	if len(p.idle) > 0 {
		sb = p.idle[0] // the oldest first
		p.idle[0] = nil
		p.idle = p.idle[1:]
		p.out++
		p.hits++
		if p.refillAt.IsZero() {
			p.refillAt = time.Now().Add(poolRefillDelay)
		}
		p.mu.Unlock()
		return sb, true, nil // the caller pokes the refill once it has answered
	}
	p.misses++
	switch {
	case p.def.Fallback == api.FallbackFail:
		p.mu.Unlock()
		return nil, false, p.exhausted("has no idle sandbox (fallback fail)")
	case p.def.Max > 0 && p.creating+p.out >= p.def.Max:
		p.mu.Unlock()
		return nil, false, p.exhausted(fmt.Sprintf("has its maximum of %d sandboxes", p.def.Max))
	}
	p.out++ // counted before it exists, so parallel takes cannot pass Max
	p.mu.Unlock()
	sb, err = p.rt.Create(ctx, p.template)
	if err != nil {
		p.released()
		return nil, false, err
	}
	return sb, false, nil
}

// released counts a handed-out sandbox as gone, which may let the pool
// refill within Max.
func (p *pool) released() {
	p.mu.Lock()
	p.out--
	p.mu.Unlock()
	p.poke()
}

// close stops the refill and closes the idle sandboxes; handed-out ones
// are their callers'. It is idempotent.
func (p *pool) close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	p.cancel()
	<-p.done
	errs := make([]error, len(idle))
	var wg sync.WaitGroup
	for i, sb := range idle {
		wg.Go(func() {
			if err := sb.Close(); err != nil {
				errs[i] = fmt.Errorf("pool %s: sandbox %s: close: %w", p.def.Name, sb.ID(), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// status reports the pool's definition and counts.
func (p *pool) status() api.PoolStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := api.PoolStatus{
		Pool: p.def, Idle: int64(len(p.idle)), Creating: p.creating, HandedOut: p.out,
		Hits: p.hits, Misses: p.misses, Failures: p.failures,
	}
	if p.failures > 0 {
		t := p.retryAt.UTC()
		st.RetryAt = &t
	}
	if p.lastErr != nil {
		t := p.lastErrAt.UTC()
		st.LastError, st.LastErrorAt = api.NewError(p.lastErr), &t
	}
	return st
}

// pooled is what a sandbox taken from a pool carries: the default env
// bound when it was taken, and its pool's count to give back once.
type pooled struct {
	pool *pool
	env  map[string]string
	once sync.Once
}

// release gives back the pool's count of a deleted sandbox; nil (a
// sandbox not from a pool) does nothing. The sandbox itself is closed by
// the caller, never returned to the pool.
func (pd *pooled) release() {
	if pd != nil {
		pd.once.Do(pd.pool.released)
	}
}

// lateEnv returns env over the default env bound when the sandbox was
// taken from a pool: a warm sandbox's Spec.Env is fixed when it is made,
// so the env of the take is added to every exec, process and session
// request instead, under the request's own variables.
func (s *sandbox) lateEnv(env map[string]string) map[string]string {
	if s.pooled == nil || len(s.pooled.env) == 0 {
		return env
	}
	out := make(map[string]string, len(env)+len(s.pooled.env))
	for k, v := range s.pooled.env {
		out[k] = v
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}
