package server

import (
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/execbox/execbox/api"
)

// withRequestID gives r its request ID: the client's X-Request-ID if it
// is valid (api.ValidRequestID), else a new one. The ID is echoed in the
// response and carried by the returned request's context, whence the
// access log reads it and package client sends it on the server's calls
// into a sandbox's agent.
func withRequestID(w http.ResponseWriter, r *http.Request) *http.Request {
	id := r.Header.Get(api.RequestIDHeader)
	if !api.ValidRequestID(id) {
		id = newRequestID()
	}
	w.Header().Set(api.RequestIDHeader, id)
	return r.WithContext(api.WithRequestID(r.Context(), id))
}

// newRequestID returns 16 random hex digits: unique enough to find one
// request in a day of logs, and cheap (no system call), since every
// request without an ID gets one. It is not a secret.
func newRequestID() string {
	var b [8]byte
	var h [16]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	hex.Encode(h[:], b[:])
	return string(h[:])
}

// accessLevel is the level of the access log: info on a server, debug on
// an agent, whose every request is a server's call that the server logged
// already, under the same request ID.
func (c *core) accessLevel() slog.Level {
	if c.serverRole {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// accessLog logs one request, once it is answered: what it asked (the
// route pattern, the path and the IDs in it), how it ended and how long
// it took. It costs nothing when the level is off.
func (c *core) accessLog(r *http.Request, route string, status int, bytes int64, d time.Duration) {
	ctx := r.Context()
	level := c.accessLevel()
	if !c.log.Enabled(ctx, level) {
		return
	}
	var buf [11]slog.Attr
	attrs := append(buf[:0],
		slog.String("method", r.Method), slog.String("route", route), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.Duration("duration", d), slog.Int64("bytes", bytes),
		slog.String("request_id", api.RequestID(ctx)))
	for _, k := range [...]string{"sandbox", "process", "session"} {
		if id := r.PathValue(k); id != "" {
			attrs = append(attrs, slog.String(k, id))
		}
	}
	c.log.LogAttrs(ctx, level, "request", attrs...)
}
