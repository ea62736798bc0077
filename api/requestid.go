package api

import "context"

// RequestIDHeader carries a request's ID: a client may send one, every
// response carries the one the request was logged under, and a server
// sends it on its own calls into a sandbox's agent, so one ID ties a
// client's call to the server's and the agent's log lines.
const RequestIDHeader = "X-Request-ID"

// MaxRequestID is the longest request ID a server accepts.
const MaxRequestID = 128

// ValidRequestID reports whether id may be a request ID: 1 to
// MaxRequestID bytes of printable ASCII (space to tilde). A server
// replaces any other with one of its own: an ID goes into log lines,
// where control bytes or a megabyte would do harm.
func ValidRequestID(id string) bool {
	if len(id) == 0 || len(id) > MaxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request ID id. The Go client
// (package client) sends it in RequestIDHeader on every call made with
// that context.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request ID ctx carries, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
