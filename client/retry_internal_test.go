package client

import (
	"testing"
	"time"
)

// TestRetryWait: waits are full jitter, below min(Max, Base·2ⁿ), and not
// all the same.
func TestRetryWait(t *testing.T) {
	r := Retry{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	for n := range 40 {
		ceil := min(r.Max, r.Base<<min(n, 20))
		seen := map[time.Duration]bool{}
		for range 50 {
			d := r.wait(n)
			if d < 0 || d >= ceil {
				t.Fatalf("wait(%d) = %v, want in [0, %v)", n, d, ceil)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("wait(%d): %d distinct values in 50; want jitter", n, len(seen))
		}
	}
}
