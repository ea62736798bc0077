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
// commands' reach: the kernel delivers a signal from inside the
// namespace to its init only if the init handles it, so ignoring every
// signal it can leaves a command running as root no way to stop (SIGSTOP)
// or kill it (SIGKILL is never delivered). Signals from outside (the
// engine's kill at removal) still end it. It also reaps the orphans an
// init inherits, until ctx is done.
func asInit(ctx context.Context) {
	for sig := syscall.Signal(1); sig < 32; sig++ {
		switch sig {
		case syscall.SIGKILL, syscall.SIGSTOP, // never delivered to init from inside
			syscall.SIGCHLD,                 // the reaper's
			syscall.SIGURG, syscall.SIGPROF: // the Go runtime's (preemption, profiling)
			continue
		}
		signal.Ignore(sig)
	}
	go proc.ReapOrphans(ctx)
}

// isInit reports whether this process is its PID namespace's first.
func isInit() bool { return os.Getpid() == 1 }
