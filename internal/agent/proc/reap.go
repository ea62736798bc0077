package proc

import "sync"

// started records the processes Start made, from their fork to their
// Wait: the children an orphan reaper (ReapOrphans) must leave alone,
// since their exit status is Wait's to collect.
var started struct {
	// gate is held for reading from a fork to its record, and for
	// writing while a reaper looks: it never sees a child of Start's that
	// is not recorded yet.
	gate sync.RWMutex
	mu   sync.Mutex
	pids map[int]struct{}
}

// beginStart is called before a fork; endStart after it, with the
// child's pid (0 if there is none).
func beginStart() { started.gate.RLock() }

func endStart(pid int) {
	if pid > 0 {
		started.mu.Lock()
		if started.pids == nil {
			started.pids = make(map[int]struct{})
		}
		started.pids[pid] = struct{}{}
		started.mu.Unlock()
	}
	started.gate.RUnlock()
}

// waited is called once a started child is reaped.
func waited(pid int) {
	started.mu.Lock()
	delete(started.pids, pid)
	started.mu.Unlock()
}

func isStarted(pid int) bool {
	started.mu.Lock()
	defer started.mu.Unlock()
	_, ok := started.pids[pid]
	return ok
}
