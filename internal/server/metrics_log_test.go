package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/runtimes/local"
)

// logRecord is one record a logRecorder kept, its attributes as strings.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// logRecorder is a slog.Handler keeping every record from level up.
type logRecorder struct {
	level slog.Level
	mu    *sync.Mutex
	recs  *[]logRecord
	with  []slog.Attr
}

func newLogRecorder(level slog.Level) *logRecorder {
	return &logRecorder{level: level, mu: new(sync.Mutex), recs: new([]logRecord)}
}

func (h *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.with {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	*h.recs = append(*h.recs, rec)
	h.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.with = append(append([]slog.Attr(nil), h.with...), attrs...)
	return &c
}

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

// find returns the records with message msg whose attributes include want.
func (h *logRecorder) find(msg string, want map[string]string) []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRecord
	for _, r := range *h.recs {
		ok := r.msg == msg
		for k, v := range want {
			ok = ok && r.attrs[k] == v
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// newLoggedServer is a server of the local runtime on loopback logging
// to a logRecorder at level.
func newLoggedServer(t *testing.T, level slog.Level, opts server.Options) (*httptest.Server, *logRecorder) {
	t.Helper()
	rec := newLogRecorder(level)
	opts.Logger = slog.New(rec)
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	return ts, rec
}

// TestAccessLog: every request of a server is logged at info once it is
// answered, with its route, path, status, size, duration, the IDs in its
// path and its request ID; the Observer sees the same route.
func TestAccessLog(t *testing.T) {
	var mu sync.Mutex
	var routes []server.RequestStats
	obs := &server.Observer{Request: func(s server.RequestStats) {
		mu.Lock()
		routes = append(routes, s)
		mu.Unlock()
	}}
	ts, rec := newLoggedServer(t, slog.LevelInfo, server.Options{Observer: obs})
	c, err := client.New(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	sb, err := c.Create(api.WithRequestID(ctx, "create 1/a"), execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if _, err := sb.Exec(api.WithRequestID(ctx, "exec-2"), execbox.ExecRequest{Command: []string{"echo", "hello"}}); err != nil {
		t.Fatal(err)
	}

	got := rec.find("request", map[string]string{"request_id": "exec-2"})
	if len(got) != 1 {
		t.Fatalf("%d access log lines of the exec, want 1: %+v", len(got), *rec.recs)
	}
	line := got[0]
	want := map[string]string{
		"method": "POST", "route": "POST /v1/sandboxes/{sandbox}/exec",
		"path": "/v1/sandboxes/" + sb.ID() + "/exec", "status": "200", "sandbox": sb.ID(),
	}
	for k, v := range want {
		if line.attrs[k] != v {
			t.Errorf("access log %s = %q, want %q", k, line.attrs[k], v)
		}
	}
	if line.level != slog.LevelInfo {
		t.Errorf("access log at %v, want info", line.level)
	}
	if n, err := strconv.Atoi(line.attrs["bytes"]); err != nil || n < len(`{"reason":"exited"}`) {
		t.Errorf("access log bytes = %q", line.attrs["bytes"])
	}
	if line.attrs["duration"] == "" || line.attrs["duration"] == "0s" {
		t.Errorf("access log duration = %q", line.attrs["duration"])
	}
	if got := rec.find("request", map[string]string{"request_id": "create 1/a", "route": "POST /v1/sandboxes", "status": "201"}); len(got) != 1 {
		t.Errorf("%d access log lines of the create, want 1", len(got))
	}

	mu.Lock()
	defer mu.Unlock()
	if len(routes) != 2 {
		t.Errorf("observed %d requests, want 2 (create, exec)", len(routes))
	}
	for _, s := range routes {
		if strings.Contains(s.Route, sb.ID()) || s.Route == "" {
			t.Errorf("Observer.Request route %q: not a pattern", s.Route)
		}
	}
}

// TestAccessLogRefused: a request refused before it reaches a handler
// (a wrong token) is logged and observed under the route it named.
func TestAccessLogRefused(t *testing.T) {
	var got []server.RequestStats
	var mu sync.Mutex
	obs := &server.Observer{Request: func(s server.RequestStats) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	}}
	ts, rec := newLoggedServer(t, slog.LevelInfo, server.Options{Token: "t", Observer: obs})
	resp, err := http.Get(ts.URL + "/v1/sandboxes/sb-secret-id/files?path=a")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %s", resp.Status)
	}
	const route = "GET /v1/sandboxes/{sandbox}/files"
	if l := rec.find("request", map[string]string{"route": route, "status": "401"}); len(l) != 1 {
		t.Errorf("%d access log lines of the refused request, want 1", len(l))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Route != route || got[0].Status != 401 {
		t.Errorf("observed %+v, want route %q status 401", got, route)
	}
}

// TestAccessLogOff: a server whose logger is above info logs no request.
func TestAccessLogOff(t *testing.T) {
	ts, rec := newLoggedServer(t, slog.LevelWarn, server.Options{})
	resp, err := http.Get(ts.URL + "/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if l := rec.find("request", nil); len(l) != 0 {
		t.Errorf("access log at warn: %+v", l)
	}
}

// TestRequestID: a valid X-Request-ID is echoed and logged; an invalid
// one (too long, a control byte, not ASCII, empty) is replaced by a new
// one, as is a missing one; new ones differ.
func TestRequestID(t *testing.T) {
	ts, rec := newLoggedServer(t, slog.LevelInfo, server.Options{})
	long := strings.Repeat("x", api.MaxRequestID)
	for _, tc := range []struct {
		name, id string
		keep     bool
	}{
		{"plain", "abc-123", true},
		{"printable", `a b!"#~{}`, true},
		{"longest", long, true},
		{"too long", long + "y", false},
		{"tab", "a\tb", false},
		{"not ASCII", "café", false},
		{"missing", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/v1/health", nil)
			if tc.id != "" {
				req.Header.Set(api.RequestIDHeader, tc.id)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := resp.Header.Get(api.RequestIDHeader)
			if tc.keep && got != tc.id {
				t.Errorf("%s %q echoed as %q", api.RequestIDHeader, tc.id, got)
			}
			if !tc.keep && (got == tc.id || !generated(got)) {
				t.Errorf("%s %q: answered %q, want a generated one", api.RequestIDHeader, tc.id, got)
			}
			if l := rec.find("request", map[string]string{"request_id": got}); len(l) != 1 {
				t.Errorf("%d access log lines with request_id %q, want 1", len(l), got)
			}
		})
	}
	seen := map[string]bool{}
	for range 50 {
		resp, err := http.Get(ts.URL + "/v1/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get(api.RequestIDHeader)
		if seen[id] {
			t.Fatalf("request ID %q generated twice", id)
		}
		seen[id] = true
	}
}

// generated reports whether id looks like a server's own: 16 hex digits.
func generated(id string) bool {
	if len(id) != 16 {
		return false
	}
	for _, c := range id {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// TestAgentAccessLogDebug: an agent (NewSandboxHandler) logs its requests
// at debug, with the request ID its caller sent: the server before it
// logged the same request at info.
func TestAgentAccessLogDebug(t *testing.T) {
	sb, err := local.New(local.Options{}).Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	rec := newLogRecorder(slog.LevelDebug)
	h := server.NewSandboxHandler(sb, "local", server.Options{Logger: slog.New(rec)})
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/v1/exec", strings.NewReader(`{"command":["true"]}`))
	r.Header.Set("Content-Type", api.ContentJSON)
	r.Header.Set(api.RequestIDHeader, "from-the-server")
	h.ServeHTTP(w, r)
	if w.Code != 200 || w.Header().Get(api.RequestIDHeader) != "from-the-server" {
		t.Fatalf("agent exec: %d %s, request ID %q", w.Code, w.Body, w.Header().Get(api.RequestIDHeader))
	}
	l := rec.find("request", map[string]string{"request_id": "from-the-server", "route": "POST /v1/exec"})
	if len(l) != 1 || l[0].level != slog.LevelDebug {
		t.Errorf("agent access log %+v, want one line at debug", l)
	}
	var res api.ExecResponse
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
		t.Errorf("agent exec response: %v", err)
	}
}
