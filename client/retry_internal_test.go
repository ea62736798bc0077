package client

import (
	"net/http"
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

// FuzzRetryAfter: any Retry-After a server sends gives a wait within
// [0, maxRetryAfter], or none; seconds and HTTP dates are understood.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"1", "0", "120", "-1", "1.5", "", "Wed, 21 Oct 2015 07:28:00 GMT", "99999999999999999999"} {
		f.Add(s, 429)
	}
	f.Add("1", 503)
	f.Fuzz(func(t *testing.T, v string, status int) {
		resp := &http.Response{StatusCode: status, Header: http.Header{}}
		resp.Header.Set("Retry-After", v)
		d, ok := retryAfter(resp)
		if ok && (d < 0 || d > maxRetryAfter || status != http.StatusTooManyRequests) {
			t.Fatalf("Retry-After %q (status %d): %v", v, status, d)
		}
		if v == "1" && status == http.StatusTooManyRequests && (!ok || d != time.Second) {
			t.Fatalf("Retry-After 1: %v, %v", d, ok)
		}
	})
}
