package server

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/execbox/execbox/api"
)

// routeMux is an http.ServeMux that remembers the patterns registered on
// it, so that tests can hold them against the OpenAPI document.
type routeMux struct {
	*http.ServeMux
	mu       sync.Mutex
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

// Handle registers handler for pattern, as http.ServeMux.Handle does.
func (m *routeMux) Handle(pattern string, handler http.Handler) {
	m.ServeMux.Handle(pattern, handler)
	m.mu.Lock()
	m.patterns = append(m.patterns, pattern)
	m.mu.Unlock()
}

// HandleFunc registers fn for pattern, as http.ServeMux.HandleFunc does.
func (m *routeMux) HandleFunc(pattern string, fn func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(fn))
}

// Patterns returns the patterns registered, in order.
func (m *routeMux) Patterns() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.patterns...)
}

// openAPI serves the protocol's OpenAPI document, api.OpenAPI: public, as
// it holds nothing of this server's.
func (c *core) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", api.ContentYAML)
	w.Header().Set("Content-Length", strconv.Itoa(len(api.OpenAPI)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(api.OpenAPI)
}
