package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/execbox/execbox/internal/metrics"
	"github.com/execbox/execbox/internal/server"
)

// serveMetrics serves only GET /metrics of m, without a token, on addr
// (server.metrics_listen: HOST:PORT or unix:PATH) until ctx is done or
// stop is called; stop returns the error that ended serving. The main
// address serves /metrics as well, behind the token: this one is for a
// scraper that should not hold the API token. An empty addr serves
// nothing. It returns where it listens.
func serveMetrics(ctx context.Context, addr string, m *metrics.Metrics, log *slog.Logger) (where string, stop func() error, err error) {
	if addr == "" {
		return "", func() error { return nil }, nil
	}
	network := "tcp"
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, addr = "unix", p
	}
	ln, err := listenOn(network, addr)
	if err != nil {
		return "", nil, fmt.Errorf("server.metrics_listen: %w", err)
	}
	where = "http://" + ln.Addr().String() + "/metrics"
	if network == "unix" {
		where = "unix:" + addr + " /metrics"
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- server.Serve(ctx, ln, mux, log, nil) }()
	return where, func() error { cancel(); return <-errc }, nil
}
