package server

import (
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/execbox/execbox/api"
)

// setTimeout sets when a sandbox's lifetime ends, as e2b's set_timeout
// does: POST /v1/sandboxes/{sandbox}/timeout {"timeout_ms": N} makes it
// end N ms from now, sooner or later than it would have. N is measured
// from now so that a client keeping a sandbox alive needs no clock of
// its own; the maximum lifetime bounds the whole life, from creation, so
// that extending cannot keep a sandbox past it. It answers the
// sandbox's description, and counts as activity.
func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request) {
	sb, err := s.lookup(r)
	var req api.SandboxTimeoutRequest
	if err == nil {
		err = readJSON(r, s.opts.MaxJSONBody, &req, true)
	}
	var expires time.Time
	if err == nil {
		expires, err = s.extension(sb, req.TimeoutMS, time.Now())
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	sb.life.expires.Store(unixNano(expires))
	sb.touch()
	sb.log.Info("lifetime set", "expires_at", expires)
	writeJSON(w, http.StatusOK, sb.liveInfo())
}

// extension is when sb's lifetime ends if set to ms from now, within
// the maximum lifetime.
func (s *Server) extension(sb *sandbox, ms float64, now time.Time) (time.Time, error) {
	if math.IsNaN(ms) || ms <= 0 || ms*1e6 >= math.MaxInt64 {
		return time.Time{}, wireInvalid("timeout_ms", "%v is not a duration: want a positive number of milliseconds from now", ms)
	}
	d := time.Duration(math.Round(ms * 1e6))
	expires := now.Add(d)
	limit := s.opts.Lifetimes.MaxTimeout
	if created := sb.info.CreatedAt; limit > 0 && expires.Sub(created) > limit {
		return time.Time{}, wireInvalid("timeout_ms", "%v from now would end the sandbox at %s, past this server's maximum lifetime of %v from its creation at %s: ask at most %d ms",
			d, expires.UTC().Format(time.RFC3339), limit, created.Format(time.RFC3339), max(0, created.Add(limit).Sub(now).Milliseconds()))
	}
	return expires, nil
}

// labelFilter returns the filter of GET /v1/sandboxes?label=K=V (repeated:
// every one must match): a sandbox matches when its label K is V.
func labelFilter(r *http.Request) (func(map[string]string) bool, error) {
	want := map[string]string{}
	for _, l := range r.URL.Query()["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, wireInvalid("label", "%q is not KEY=VALUE", l)
		}
		want[k] = v
	}
	return func(labels map[string]string) bool {
		for k, v := range want {
			if got, ok := labels[k]; !ok || got != v {
				return false
			}
		}
		return true
	}, nil
}

// ended returns the last state of the ended sandbox id, if remembered.
func (s *Server) ended(id string) (api.SandboxInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, ok := s.gone[id]
	return info, ok
}
