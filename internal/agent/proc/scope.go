package proc

import (
	"os/exec"
	"syscall"

	"github.com/execbox/execbox"
)

// Scope holds every process of one command, whatever it does to leave its
// process group or tree: a runtime that confines commands implements it
// with a cgroup. The process tree search (descendants, process group,
// marker) still runs; the scope adds the processes it cannot see, such as
// a daemon that double-forked and scrubbed its environment.
//
// proc calls Start once; then Signal any number of times, from any
// goroutine, until and after Finish; and Finish exactly once.
type Scope interface {
	// Start starts cmd inside the scope, in place of cmd.Start: for
	// example with SysProcAttr.CgroupFD set, or from a thread placed in
	// the cgroup.
	Start(cmd *exec.Cmd) error
	// Signal sends sig to every live process in the scope and returns how
	// many there were. Signal 0 only counts them.
	Signal(sig syscall.Signal) int
	// Finish is called when the main process has been reaped, with the
	// Result about to be published, which it may amend (an OOM kill seen
	// by the cgroup, its peak memory); or with nil when the process never
	// started. The scope then releases what it holds as soon as it is
	// empty: processes the command left running may keep it alive.
	Finish(res *execbox.Result)
}
