package proc

import (
	"context"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ReapOrphans reaps, until ctx is done, the children of this process
// that Start did not make: an agent that is the first process of its
// PID namespace (a container's) inherits every process whose parent
// exits, and without a reaper each would stay a zombie holding a PID.
// Children of Start's are left to their Wait.
func ReapOrphans(ctx context.Context) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGCHLD)
	defer signal.Stop(ch)
	// SIGCHLDs coalesce: a slow tick catches what one could miss.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-tick.C:
		}
		reapOrphans()
	}
}

// reapOrphans reaps every exited child that is not Start's. A child's
// entry is in the children file of the thread that forked it, or of the
// main thread for an orphan handed to this process.
func reapOrphans() {
	started.gate.Lock()
	defer started.gate.Unlock()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil || isStarted(pid) {
				continue
			}
			var ws unix.WaitStatus
			for {
				if _, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err != unix.EINTR {
					break
				}
			}
		}
	}
}
