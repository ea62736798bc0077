package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/execbox/execbox"
)

// ShutdownGrace is how long Serve lets requests in flight finish after
// its context is done (and stop has run) before closing their connections.
const ShutdownGrace = 5 * time.Second

// Serve serves h on ln until ctx is done, then shuts down: it stops
// accepting connections, runs stop (nil for none; it should end long
// requests, for example by closing the sandboxes they wait on), and gives
// the requests in flight ShutdownGrace before closing their connections.
// It returns nil after a shutdown, or the error that stopped serving.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, stop func()) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if stop != nil {
			stop()
		}
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(sctx) }() // closes the listener at once
	if stop != nil {
		stop()
	}
	if err := <-done; err != nil {
		log.Warn("requests still running after the shutdown grace period; closing their connections", "grace", ShutdownGrace)
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeSandbox serves one sandbox's endpoints at /v1/ on ln (a unix
// socket, an inherited fd, a loopback port) until ctx is done: the agent
// side of the protocol. It does not close sb; client.New(...).Agent(ctx)
// is the other side.
func ServeSandbox(ctx context.Context, ln net.Listener, sb execbox.Sandbox, runtime string, opts Options) error {
	return Serve(ctx, ln, NewSandboxHandler(sb, runtime, opts), opts.Logger, nil)
}
