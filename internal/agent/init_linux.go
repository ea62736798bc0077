package agent

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/execbox/execbox/internal/agent/proc"
)

// asInit makes an agent that is the first process of its PID namespace
// (a container's entry point) that namespace's init, out of its
// commands' reach. The kernel delivers a signal sent from inside the
// namespace to its init only if the init handles it, and never SIGKILL
// or SIGSTOP: every other signal is handled here, and dropped. (Handled,
// not ignored: an ignored signal stays ignored across exec, in every
// command.) Signals from outside (the engine's kill at removal) still
// end it. It also reaps the orphans an init inherits, until ctx is done.
func asInit(ctx context.Context) {
	var sigs []os.Signal
	for sig := syscall.Signal(1); sig < 32; sig++ {
		switch sig {
		case syscall.SIGKILL, syscall.SIGSTOP, // never delivered to init from inside
			syscall.SIGCHLD,                 // the reaper's
			syscall.SIGURG, syscall.SIGPROF: // the Go runtime's (preemption, profiling)
			continue
		}
		sigs = append(sigs, sig)
	}
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, sigs...)
	go func() {
		for range ch {
		}
	}()
	go proc.ReapOrphans(ctx)
}

// isInit reports whether this process is its PID namespace's first.
func isInit() bool { return os.Getpid() == 1 }

// SignalContext is the context an agent command serves under: done at
// SIGINT or SIGTERM, except for an agent that is its namespace's init
// (asInit), which only the end of its namespace ends.
func SignalContext() (context.Context, context.CancelFunc) {
	if isInit() {
		return context.WithCancel(context.Background())
	}
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
