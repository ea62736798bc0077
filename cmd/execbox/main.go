// Command execbox runs commands in a workspace, with limits, and reports
// exactly what happened. See 'execbox help'.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/execbox/execbox/internal/cli"
	"github.com/execbox/execbox/internal/fds"
)

func main() {
	// Nothing this process inherited beyond 0-2 may reach a command.
	if err := fds.CloseExecFrom(3); err != nil {
		fmt.Fprintf(os.Stderr, "execbox: %v\n", err)
		os.Exit(1)
	}
	// Writing to a closed stdout must be an error to handle (kill the
	// command, exit 141), not a silent death leaving it running. Notify,
	// unlike Ignore, is not inherited by the commands execbox starts.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
