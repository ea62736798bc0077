package server_test

import (
	"net/http/httptest"
	"testing"

	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/server"
)

// FuzzRequestID: whatever X-Request-ID a request carries, the response's
// is a valid one: the same if it was valid, else a generated one.
func FuzzRequestID(f *testing.F) {
	for _, s := range []string{"", "abc", "a b", "a\tb", "café", "\x00", string(make([]byte, 200))} {
		f.Add(s)
	}
	h := server.NewSandboxHandler(instant{}, "fuzz", server.Options{})
	f.Fuzz(func(t *testing.T, id string) {
		r := httptest.NewRequest("GET", "/v1/version", nil)
		r.Header.Set(api.RequestIDHeader, id)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		got := w.Header().Get(api.RequestIDHeader)
		switch {
		case !api.ValidRequestID(got):
			t.Fatalf("request ID %q answered with the invalid %q", id, got)
		case api.ValidRequestID(id) && got != id:
			t.Fatalf("valid request ID %q answered with %q", id, got)
		case !api.ValidRequestID(id) && !generated(got):
			t.Fatalf("invalid request ID %q answered with %q, not a generated one", id, got)
		}
	})
}
