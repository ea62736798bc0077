//go:build !linux

package agent

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func asInit(context.Context) {}
func isInit() bool           { return false }

// SignalContext is the context an agent command serves under: done at
// SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
