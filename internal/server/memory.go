package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// The memory a Server holds for its callers is bounded by one budget,
// server-wide and per tenant (docs/server.md, "Memory"): the results of
// execs and session runs, from before the command starts until the
// response is written; file contents read or written; JSON request
// bodies. Each reserves its worst case before anything is read into
// memory, so the bound holds whatever the clients do: a request the
// budget cannot take is refused (resource_exhausted, 429, with
// Retry-After) before it runs. A reader too slow to take a response at
// MinReadRate is ended, which frees what it held.

// Defaults of the budget.
const (
	// DefaultResultMemory is Maximums.ResultMemory when unset.
	DefaultResultMemory = 1 << 30
	// DefaultMinReadRate is Options.MinReadRate when unset.
	DefaultMinReadRate = 1 << 20
	// writeGrace is the time any response holding a result may take
	// beyond its size at MinReadRate.
	writeGrace = 10 * time.Second
)

// memBudget counts the bytes a Server holds for requests, in total and
// per tenant. A nil *memBudget (an agent's) bounds nothing.
type memBudget struct {
	rate    int64 // Options.MinReadRate; 0: none
	limit   int64
	tenants map[string]int64 // each key's own bound; others get limit/2

	mu     sync.Mutex
	held   int64
	byName map[string]int64
	freed  chan struct{} // closed at the next give; nil: no one waits
}

// newMemBudget returns the budget of a Server with opts: the server-wide
// Max.ResultMemory (DefaultResultMemory when unset), each key's own
// Max.ResultMemory, and for a key without one half the server's (admins:
// all of it), so that no one tenant can take all.
func newMemBudget(opts Options) *memBudget {
	b := &memBudget{limit: opts.Max.ResultMemory, tenants: map[string]int64{}, byName: map[string]int64{}}
	if b.limit <= 0 {
		b.limit = DefaultResultMemory
	}
	switch b.rate = opts.MinReadRate; {
	case b.rate == 0:
		b.rate = DefaultMinReadRate
	case b.rate < 0:
		b.rate = 0
	}
	if opts.Token != "" {
		b.tenants[AdminName] = b.limit
	}
	for _, k := range opts.Keys {
		switch {
		case k.Max.ResultMemory > 0:
			b.tenants[k.Name] = min(k.Max.ResultMemory, b.limit)
		case k.Admin:
			b.tenants[k.Name] = b.limit
		default:
			b.tenants[k.Name] = b.limit / 2
		}
	}
	return b
}

// tenantLimit is the bound of tenant's holdings: its key's, or all of
// the budget on a server without keys.
func (b *memBudget) tenantLimit(tenant string) int64 {
	if n, ok := b.tenants[tenant]; ok {
		return n
	}
	return b.limit
}

// ErrMemoryBudget is wrapped by the error of a request refused because
// the server holds too much for its callers; it is ErrResourceExhausted.
var ErrMemoryBudget = fmt.Errorf("%w: the server's memory for results is in use", execbox.ErrResourceExhausted)

// hold is a reservation of a memBudget; a nil *hold holds nothing.
type hold struct {
	b      *memBudget
	tenant string
	n      int64
}

// reserve takes n bytes of r's budget for what (named in the error, with
// field, the request's field that sets n). When the tenant's or the
// server's bound would be passed, it waits up to reserveWait (while r
// lives) for others to give back, then fails with ErrMemoryBudget: a
// burst waits its turn, a budget held by callers that do not read is
// refused.
func reserve(r *http.Request, what, field string, n int64) (*hold, error) {
	b, _ := r.Context().Value(memKey{}).(*memBudget)
	if b == nil || n <= 0 {
		return nil, nil
	}
	tenant := principal(r).Tenant
	var timer *time.Timer
	for {
		h, freed, err := b.take(tenant, what, field, n)
		if freed == nil {
			return h, err
		}
		if timer == nil {
			timer = time.NewTimer(reserveWait)
			defer timer.Stop()
		}
		select {
		case <-freed:
		case <-timer.C:
			return nil, err
		case <-r.Context().Done():
			return nil, err
		}
	}
}

// reserveWait is how long a request waits for room in the budget before
// it is refused.
const reserveWait = 5 * time.Second

// take reserves n bytes for tenant now, or returns why not and, when
// room may come, a channel closed at the next give.
func (b *memBudget) take(tenant, what, field string, n int64) (*hold, <-chan struct{}, error) {
	tl := b.tenantLimit(tenant)
	b.mu.Lock()
	defer b.mu.Unlock()
	mine := b.byName[tenant]
	switch {
	case n > tl:
		return nil, nil, execbox.Invalid(field, "%s needs up to %s held on the server, more than the %s a caller may hold (server.max_result_memory)", what, mib(n), mib(tl))
	case mine+n > tl:
		return nil, b.freedLocked(), fmt.Errorf("%s needs up to %s held on the server, and results and files not yet read already hold %s of the %s allowed to %s: read them, or ask a smaller %s (%w)",
			what, mib(n), mib(mine), mib(tl), tenantName(tenant), field, ErrMemoryBudget)
	case b.held+n > b.limit:
		return nil, b.freedLocked(), fmt.Errorf("%s needs up to %s held on the server, and results and files not yet read hold %s of its %s: retry later, or ask a smaller %s (%w)",
			what, mib(n), mib(b.held), mib(b.limit), field, ErrMemoryBudget)
	}
	b.held += n
	b.byName[tenant] = mine + n
	return &hold{b: b, tenant: tenant, n: n}, nil, nil
}

// freedLocked returns the channel closed at the next give.
func (b *memBudget) freedLocked() <-chan struct{} {
	if b.freed == nil {
		b.freed = make(chan struct{})
	}
	return b.freed
}

// shrink lowers h to n bytes (what is actually held, once known).
func (h *hold) shrink(n int64) {
	if h == nil || n >= h.n {
		return
	}
	h.give(h.n - max(n, 0))
}

// release gives back all of h; it may be called more than once.
func (h *hold) release() {
	if h != nil {
		h.give(h.n)
	}
}

func (h *hold) give(d int64) {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	h.n -= d
	b.held -= d
	if b.byName[h.tenant] -= d; b.byName[h.tenant] <= 0 {
		delete(b.byName, h.tenant)
	}
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
}

// heldBytes reports what b holds in all (for tests and metrics).
func (b *memBudget) heldBytes() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

type memKey struct{}

// withBudget makes b the budget of r's handlers.
func withBudget(r *http.Request, b *memBudget) *http.Request {
	if b == nil {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), memKey{}, b))
}

// writeDeadline bounds the time of writing a size-byte response to w on
// a Server: writeGrace plus size at Options.MinReadRate. A reader slower
// than that has its connection ended, which frees what its response
// held. The returned function clears the deadline for the connection's
// next request.
func writeDeadline(w http.ResponseWriter, r *http.Request, size int64) func() {
	b, _ := r.Context().Value(memKey{}).(*memBudget)
	if b == nil || b.rate <= 0 {
		return func() {}
	}
	rc := http.NewResponseController(w)
	d := writeGrace + time.Duration(size/b.rate)*time.Second
	if err := rc.SetWriteDeadline(time.Now().Add(d)); err != nil {
		return func() {}
	}
	return func() { _ = rc.SetWriteDeadline(time.Time{}) }
}

func tenantName(t string) string {
	if t == "" {
		return "this caller"
	}
	return "tenant " + t
}

func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// writeJSONHeld is writeJSON for an answer the budget must count: its
// encoding is held by h (reserved before the work, for its worst case)
// or, with h nil, reserved here at its encoded size, naming what and
// field when the budget cannot take it; and a reader slower than
// MinReadRate is ended, which frees it.
func writeJSONHeld(w http.ResponseWriter, r *http.Request, h *hold, what, field string, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encoding the response: %w", err) // a bug: the wire types always encode
	}
	if h == nil {
		var err error
		if h, err = reserve(r, what, field, int64(buf.Len())); err != nil {
			return err
		}
		defer h.release()
	} else {
		h.shrink(int64(buf.Len()))
	}
	w.Header().Set("Content-Type", api.ContentJSON)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	defer writeDeadline(w, r, int64(buf.Len()))()
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // the client went away, or was too slow
	return nil
}
