package docker

import (
	"fmt"
	"os"

	"github.com/execbox/execbox/internal/agent"
	"github.com/execbox/execbox/internal/fds"
	"golang.org/x/sys/unix"
)

// A program that links this runtime is its own agent in a container: the
// container's entry point is this program bind-mounted at agentPath, so
// argv[0] says which part to run, before main.
func init() {
	if len(os.Args) > 0 && os.Args[0] == agentPath {
		os.Exit(runAgent(os.Args[1:]))
	}
}

// runAgent is the agent command (agent.Main) as the container's process:
// descriptors it inherited closed, and not dumpable, so that a command
// running as the same uid cannot read its memory or descriptors.
func runAgent(args []string) int {
	if err := fds.CloseExecFrom(3); err != nil {
		fmt.Fprintf(os.Stderr, "execbox agent: %v\n", err)
		return 125
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "execbox agent: prctl(PR_SET_DUMPABLE): %v\n", err)
		return 125
	}
	ctx, stop := agent.SignalContext()
	defer stop()
	if err := agent.Main(ctx, args, os.Stdin, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "execbox agent: %v\n", err)
		return 1
	}
	return 0
}
