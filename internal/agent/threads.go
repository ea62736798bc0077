package agent

import (
	"runtime"
	"sync"
)

// spareThreads is how many OS threads an agent makes at its start and
// keeps idle (prewarmThreads).
const spareThreads = 16

// prewarmThreads makes n OS threads now and leaves them idle in the Go
// scheduler, which reuses them before it makes new ones. An agent whose
// commands share its process limit (a container's pids cgroup, as
// Main's agents do) may find none left to make once a command forks
// without bound, and the Go
// runtime cannot survive a thread it fails to create: with threads in
// reserve, the agent goes on answering, times the command out and kills
// it.
func prewarmThreads(n int) {
	var locked, release sync.WaitGroup
	locked.Add(n)
	release.Add(1)
	for range n {
		go func() {
			runtime.LockOSThread() // each holds a thread of its own...
			locked.Done()
			release.Wait()
			runtime.UnlockOSThread() // ...which stays, idle, when it returns
		}()
	}
	locked.Wait()
	release.Done()
}
