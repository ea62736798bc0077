package server

import "net/http"

// RoutePatterns returns the route patterns registered on h, a *Server or
// a handler of NewSandboxHandler, for the OpenAPI tests.
func RoutePatterns(h http.Handler) []string {
	switch h := h.(type) {
	case *Server:
		return h.mux.Patterns()
	case *core:
		return h.mux.Patterns()
	}
	return nil
}
