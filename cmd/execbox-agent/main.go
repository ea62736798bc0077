// Command execbox-agent serves one sandbox over the execbox protocol (see
// package api), from inside an isolation boundary: a runtime starts it in
// the namespaces, container or pod it built, and talks to it with package
// client over a unix socket or an inherited listener.
//
// Usage:
//
//	execbox-agent --listen unix:/run/execbox/agent.sock --config /run/execbox/agent.json
//	execbox-agent --listen fd:3 --config - < agent.json
//	execbox-agent --listen 127.0.0.1:8080 --id sb-1 --workspace /workspace
//
// The configuration is an agent.Boot as JSON (id, runtime, workspace,
// spec defaults and capabilities in the protocol's form); --id, --workspace and
// --runtime override it. --listen takes unix:PATH, fd:N (a listening
// socket the parent passed, e.g. with exec.Cmd.ExtraFiles) or HOST:PORT.
// The bearer token, if any, is read from the variable --token-env names.
//
// SIGTERM or SIGINT stops it: it stops serving, kills everything the
// sandbox started, and exits 0. SIGQUIT writes every goroutine's stack to
// stderr and carries on. Logs go to stderr.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/execbox/execbox/internal/agent"
	"github.com/execbox/execbox/internal/fds"
)

func main() {
	// Nothing this process inherited beyond 0-2 may reach a command; the
	// --listen fd:N socket is this process's own to use.
	if err := fds.CloseExecFrom(3); err != nil {
		fmt.Fprintf(os.Stderr, "execbox-agent: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := agent.SignalContext()
	defer stop()
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGQUIT)
	go func() {
		for range quit {
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		}
	}()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "execbox-agent: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) error {
	return agent.Main(ctx, args, stdin, stderr)
}
