package server

import (
	"time"

	"github.com/execbox/execbox/api"
)

// registerMetrics serves Options.Metrics at GET /metrics, behind the
// token like every other route: the counts are the operator's.
func (s *Server) registerMetrics() {
	if h := s.opts.Metrics; h != nil {
		s.mux.Handle("GET /metrics", h)
	}
}

// LiveSandboxes returns how many sandboxes the server holds, by runtime,
// every runtime of the server present (zero when it holds none): what
// a live-sandboxes gauge reads at each scrape. Sandboxes being created
// are not counted until they are held.
func (s *Server) LiveSandboxes() map[string]int {
	out := make(map[string]int, len(s.names))
	for _, name := range s.names {
		out[name] = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sb := range s.sandboxes {
		out[sb.runtime]++
	}
	return out
}

// observeCreate tells the Observer about a create by runtime that began
// at start and ended with err.
func (s *Server) observeCreate(runtime string, start time.Time, err error) {
	f := s.opts.Observer.Create
	if f == nil {
		return
	}
	outcome := "created"
	if err != nil {
		outcome = "error:" + string(api.CodeOf(err))
	}
	f(CreateStats{Runtime: runtime, Outcome: outcome, Duration: time.Since(start)})
}

// observeClosed tells the Observer that a sandbox of runtime ended, and
// why (see ClosedStats.Reason).
func (s *Server) observeClosed(runtime, reason string) {
	if f := s.opts.Observer.Closed; f != nil {
		f(ClosedStats{Runtime: runtime, Reason: reason})
	}
}
