package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/agent"
	"github.com/execbox/execbox/internal/agent/workspace"
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

// AgentConfig describes the sandbox an agent serves inside a boundary. It
// is JSON so that the runtime starting the agent can hand it over (a file,
// a pipe, an environment variable): see cmd/execbox-agent.
type AgentConfig struct {
	// ID identifies the sandbox; it must be unique on the machine (it
	// marks every process for tree kills).
	ID string `json:"id"`
	// Runtime names the runtime in errors and GET /v1/info ("sandbox").
	Runtime string `json:"runtime"`
	// Workspace is the workspace directory, as the agent sees it. It
	// must exist; the agent never removes it.
	Workspace string `json:"workspace"`
	// Spec supplies the defaults of every command: Env, EnvPolicy,
	// EnvAllow, Limits and User. Snapshot, Assets and Setup are ignored:
	// the runtime applies them through the protocol once the agent runs
	// (internal/provision over a client).
	Spec execbox.Spec `json:"spec"`
	// Capabilities is what the agent may enforce; other limits are
	// refused with ErrUnsupported. Limits a boundary enforces from the
	// outside (cgroups) are the runtime's to check before they reach the
	// agent.
	Capabilities execbox.Capabilities `json:"capabilities"`
}

// RunAgent serves the sandbox cfg describes on ln until ctx is done, then
// kills every process the sandbox started and returns. It is what an agent
// process runs; a runtime can also call it in a re-executed child of its
// own binary.
func RunAgent(ctx context.Context, ln net.Listener, cfg AgentConfig, opts Options) error {
	if cfg.ID == "" || cfg.Workspace == "" {
		return fmt.Errorf("agent: %w", errors.Join(
			condErr(cfg.ID == "", execbox.Invalid("id", "is required")),
			condErr(cfg.Workspace == "", execbox.Invalid("workspace", "is required"))))
	}
	ws, err := workspace.Open(cfg.Workspace)
	if err != nil {
		return fmt.Errorf("agent: open workspace: %w", err)
	}
	sb := agent.New(agent.Config{
		ID:           cfg.ID,
		Runtime:      cfg.Runtime,
		Workspace:    ws,
		Spec:         cfg.Spec,
		Capabilities: cfg.Capabilities,
		Logger:       opts.Logger,
	})
	var closeErr error
	err = Serve(ctx, ln, NewSandboxHandler(sb, cfg.Runtime, opts), opts.Logger, func() { closeErr = sb.Close() })
	return errors.Join(err, closeErr)
}

func condErr(cond bool, err error) error {
	if cond {
		return err
	}
	return nil
}
