package server

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/execbox/execbox"
)

// TestMemoryBudgetWaits: a reservation the budget cannot take now waits
// for room, and gets it when another is given back; one whose caller
// goes away is refused with ErrMemoryBudget (ErrResourceExhausted); one
// larger than a caller may ever hold is invalid at once, naming its
// field. Tenants hold their own share.
func TestMemoryBudgetWaits(t *testing.T) {
	b := newMemBudget(Options{Max: Maximums{ResultMemory: 100}, Keys: []Key{{Name: "a"}, {Name: "b", Max: Maximums{ResultMemory: 30}}}})
	as := func(ctx context.Context, tenant string) func(n int64) (*hold, error) {
		r := httptest.NewRequestWithContext(context.WithValue(ctx, principalKey{}, Principal{Tenant: tenant}), "GET", "/", nil)
		r = withBudget(r, b)
		return func(n int64) (*hold, error) { return reserve(r, "a test", "output_limit", n) }
	}
	ctx := t.Context()
	h1, err := as(ctx, "a")(50) // a's share: half of 100
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		h, err := as(ctx, "a")(20)
		h.release()
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a reservation over the tenant's share did not wait: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	h1.shrink(10)
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("the waiting reservation, once there was room: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiting reservation did not get the room given back")
	}
	if _, err := as(ctx, "b")(31); !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("more than b may ever hold: %v, want invalid_argument", err)
	}
	hb, err := as(ctx, "b")(30)
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := as(gone, "b")(1); !errors.Is(err, ErrMemoryBudget) || !errors.Is(err, execbox.ErrResourceExhausted) {
		t.Errorf("over b's share, the caller gone: %v, want ErrMemoryBudget", err)
	}
	hb.release()
	h1.release()
	if n := b.heldBytes(); n != 0 {
		t.Errorf("%d bytes held after every release", n)
	}
}
