package sandbox

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/execbox/execbox"
)

// lostWait is how long lost waits for the init to end after a call
// could not reach the agent: the init exits as soon as the agent ends.
const lostWait = time.Second

// lost explains a call that could not reach the agent while the sandbox
// is open: if the init has ended (it exits with the agent's status when
// the agent ends, and the kernel then kills the rest of the namespace),
// how the agent ended.
func (s *Sandbox) lost(err error) error {
	select {
	case <-s.init.done:
	case <-time.After(lostWait):
		return err // the init runs: the connection broke, not the agent
	}
	if s.init.startErr != nil || s.init.cmd.ProcessState == nil {
		return err
	}
	return fmt.Errorf("sandbox %s: its agent is gone, %s: %w", s.id, agentEnd(s.init.cmd.ProcessState), execbox.ErrUnavailable)
}

// agentEnd says how the agent ended, from its init's exit status: the
// agent's exit code, or 128 plus the signal that killed it.
func agentEnd(ps *os.ProcessState) string {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return "its init ended"
	case ws.Signaled():
		return "its init was killed by " + unixSignal(ws.Signal())
	case ws.ExitStatus() > 128:
		return "killed by " + unixSignal(syscall.Signal(ws.ExitStatus()-128))
	}
	return fmt.Sprintf("exited with code %d", ws.ExitStatus())
}

func unixSignal(sig syscall.Signal) string {
	return fmt.Sprintf("signal %d (%v)", int(sig), sig)
}
