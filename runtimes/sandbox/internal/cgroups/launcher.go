//go:build linux

package cgroups

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
)

// launcher is the thread that forks every command on cgroup v1, where a
// process can only be born into a cgroup by being forked by a thread that
// is in it. It lives in the commands' cgroup ("cmds") of every
// controller but memory, so that each start moves it only into the
// command's own pids cgroup (and memory and cpu ones when the command has
// them) and back: two to six writes to tasks files instead of two per
// mounted controller (a quarter of the agent's CPU time per exec of
// `true`, measured with six controllers). It stays in the agent's memory
// cgroup between starts: a thread of the agent in the commands' memory
// cgroup would make the agent a candidate of their OOM kills. Its
// consequences: it counts as one task in the commands' pids cgroup, and
// the little CPU it uses is the commands'.
//
// The thread never leaves its goroutine (which never ends before the
// tree's Close): a command's parent-death signal follows the thread that
// forked it. At Close it returns to the agent's cgroups and ends (or, if
// it was the main thread, which Go keeps, stays there unused).
type launcher struct {
	once sync.Once
	stop sync.Once
	work chan func()
	done chan struct{} // closed once the thread has left "cmds"
	err  error         // the thread could not be placed, or could not come back
	mu   sync.Mutex
}

// start starts the launcher thread of t once, placed in t's cgroups.
func (t *Tree) startLauncher() error {
	l := &t.launcher
	l.once.Do(func() {
		l.work, l.done = make(chan func()), make(chan struct{})
		placed := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // for good: see launcher
			// Leave "cmds" before the thread ends: nothing that empties
			// the commands' cgroups must find the agent there.
			defer close(l.done)
			defer t.leave()
			for _, ctrl := range sortedKeys(t.dirs) {
				if ctrl == "memory" {
					continue
				}
				if err := enterSelf(t.dirs[ctrl]); err != nil {
					placed <- fmt.Errorf("place the launcher thread: %w", err)
					return
				}
			}
			placed <- nil
			for fn := range l.work {
				fn()
			}
		}()
		l.err = <-placed
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// startV1 starts cmd from the launcher thread, inside c's cgroups,
// running onThread there first.
func (c *Child) startV1(cmd *exec.Cmd, onThread func() error) error {
	t := c.t
	if err := t.startLauncher(); err != nil {
		return err
	}
	done := make(chan error, 1)
	l := &t.launcher
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return l.err
	}
	l.work <- func() { done <- c.fork(cmd, onThread) }
	l.mu.Unlock()
	return <-done
}

// fork runs on the launcher thread: into c's cgroups, fork, and back.
func (c *Child) fork(cmd *exec.Cmd, onThread func() error) error {
	t := c.t
	type move struct{ into, back string }
	var moves []move
	for _, ctrl := range sortedKeys(c.dirs) {
		back := t.dirs[ctrl]
		if ctrl == "memory" {
			back = t.home[ctrl]
		}
		moves = append(moves, move{c.dirs[ctrl], back})
	}
	if _, own := c.dirs["memory"]; !own && t.dirs["memory"] != "" {
		moves = append(moves, move{t.dirs["memory"], t.home["memory"]})
	}
	var err error
	moved := 0
	for _, m := range moves {
		if err = enterSelf(m.into); err != nil {
			err = fmt.Errorf("enter cgroup: %w", err)
			break
		}
		moved++
	}
	if err == nil {
		err = onThread()
	}
	if err == nil {
		err = cmd.Start()
	}
	var back []error
	for _, m := range moves[:moved] {
		if berr := enterSelf(m.back); berr != nil {
			back = append(back, berr)
		}
	}
	if berr := errors.Join(back...); berr != nil {
		// The thread is stuck in a command's cgroup: it starts nothing
		// more. Its child would be born in the wrong place for the next
		// command, so end this one now, cleanly.
		if err == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
		t.launcher.mu.Lock()
		t.launcher.err = fmt.Errorf("leave cgroup: %w", berr)
		t.launcher.mu.Unlock()
		return t.launcher.err
	}
	return err
}

// leave moves the calling thread back to the agent's cgroups.
func (t *Tree) leave() {
	for _, ctrl := range sortedKeys(t.home) {
		_ = enterSelf(t.home[ctrl])
	}
}

// stopLauncher ends the launcher thread (Close), once it has left the
// commands' cgroups; every command it started gets its parent-death
// signal.
func (t *Tree) stopLauncher() {
	l := &t.launcher
	l.once.Do(func() {}) // never started: nothing to stop
	l.stop.Do(func() {
		l.mu.Lock()
		if l.err == nil {
			l.err = errors.New("cgroups: the tree is closed")
		}
		work := l.work
		l.work = nil
		l.mu.Unlock()
		if work != nil {
			close(work)
			<-l.done
		}
	})
}
