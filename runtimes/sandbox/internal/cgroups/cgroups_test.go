//go:build linux

package cgroups

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
	"golang.org/x/sys/unix"
)

// newSandbox makes a sandbox cgroup for the test, destroyed at its end.
func newSandbox(t *testing.T, l Limits) (Host, *Sandbox) {
	t.Helper()
	testutil.Require(t, testutil.Root, testutil.CgroupV1orV2)
	h := Probe("execbox-test", "")
	if len(h.Problems) > 0 {
		t.Fatalf("Probe: %v", h.Problems)
	}
	name := strings.ReplaceAll(t.Name(), "/", "_")
	s, err := Create(h, name, l, Owner{UID: 0, GID: 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Seal(); err != nil {
		s.Destroy(time.Now().Add(5 * time.Second))
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Destroy(time.Now().Add(5 * time.Second)); err != nil {
			t.Error(err)
		}
		for _, d := range s.Dirs() {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("cgroup %s left after Destroy", d)
			}
		}
	})
	return h, s
}

func TestSandboxLimits(t *testing.T) {
	_, s := newSandbox(t, Limits{Memory: 64 << 20, PIDs: 32, CPUs: 0.5})
	type check struct{ file, want string }
	want := map[string][]check{
		"memory": {{"memory.limit_in_bytes", "67108864"}},
		"pids":   {{"pids.max", "32"}},
		"cpu":    {{"cpu.cfs_quota_us", "50000"}},
		"":       {{"memory.max", "67108864"}, {"pids.max", "32"}, {"cpu.max", "50000 100000"}},
	}
	agent := map[string][]check{
		"memory": {{"memory.limit_in_bytes", strconv.Itoa(AgentMemory)}},
		"pids":   {{"pids.max", strconv.Itoa(AgentPIDs)}},
		"":       {{"memory.max", strconv.Itoa(AgentMemory)}, {"pids.max", strconv.Itoa(AgentPIDs)}},
	}
	// The sandbox's own cgroup bounds both, and anything else made in it.
	top := map[string][]check{
		"memory": {{"memory.limit_in_bytes", strconv.Itoa(64<<20 + AgentMemory)}},
		"pids":   {{"pids.max", strconv.Itoa(32 + AgentPIDs)}},
		"":       {{"memory.max", strconv.Itoa(64<<20 + AgentMemory)}, {"pids.max", strconv.Itoa(32 + AgentPIDs)}},
	}
	checked := 0
	for ctrl, d := range s.Dirs() {
		for sub, m := range map[string]map[string][]check{CmdsDir: want, AgentDir: agent, "": top} {
			for _, c := range m[ctrl] {
				p := filepath.Join(d, sub, c.file)
				b, err := os.ReadFile(p)
				if got := strings.TrimSpace(string(b)); err != nil || got != c.want {
					t.Errorf("%s = %q, %v; want %q", p, got, err, c.want)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Errorf("no limit file checked in %v", s.Dirs())
	}
}

// TestChild runs commands in child cgroups of a sandbox cgroup, from a
// goroutine that is not the main thread, as the agent does.
func TestChild(t *testing.T) {
	h, s := newSandbox(t, Limits{Memory: 256 << 20, PIDs: 64})
	cmds, home := map[string]string{}, map[string]string{}
	for c, d := range s.Dirs() {
		cmds[c], home[c] = filepath.Join(d, CmdsDir), filepath.Join(d, AgentDir)
	}
	tree, err := OpenTree(h.Version, cmds, home, Limits{Memory: 256 << 20, PIDs: 64})
	if err != nil {
		t.Fatal(err)
	}
	// The tree's launcher thread (v1) ends in the agent's cgroups, here
	// the test sandbox's; if it was the main thread, which Go keeps, the
	// sandbox's removal would kill this process: bring every thread home.
	orig, _ := os.ReadFile("/proc/self/cgroup")
	defer returnThreads(s.Dirs(), orig)
	defer tree.Close()

	// Inside a boundary the agent lives in the tree's root, where Start
	// returns its thread. Here, a worker thread plays the agent: it moves
	// into the root first, and back to the test's cgroups at the end.
	starts := make(chan func())
	workerDone := make(chan struct{})
	defer func() { close(starts); <-workerDone }()
	go func() {
		defer close(workerDone)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid := []byte(strconv.Itoa(unix.Gettid()))
		orig, _ := os.ReadFile("/proc/thread-self/cgroup")
		for _, d := range home {
			if h.Version == 2 {
				break // v2 starts commands with CLONE_INTO_CGROUP, from anywhere
			}
			if err := os.WriteFile(filepath.Join(d, "tasks"), tid, 0); err != nil {
				t.Error(err)
			}
		}
		for f := range starts {
			f()
		}
		for line := range strings.SplitSeq(strings.TrimSpace(string(orig)), "\n") {
			f := strings.SplitN(line, ":", 3)
			for ctrl := range s.Dirs() {
				if f[1] == ctrl {
					os.WriteFile(filepath.Join("/sys/fs/cgroup", ctrl, f[2], "tasks"), tid, 0)
				}
			}
		}
	}()
	run := func(l Limits, script string) (*Child, *exec.Cmd, error) {
		c, err := tree.NewChild(l)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", script)
		done := make(chan error, 1)
		starts <- func() { done <- c.Start(cmd, func() error { return nil }) }
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return c, cmd, cmd.Wait()
	}

	t.Run("placed", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "cgroup")
		c, _, err := run(Limits{PIDs: 8}, "cat /proc/self/cgroup > "+out)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		// The command's own cgroup, as this process sees it: in the
		// pids hierarchy (v1) or the unified one (v2).
		ctrl := "pids"
		if h.Version == 2 {
			ctrl = ""
		}
		want := ":" + ctrl + ":" + strings.TrimPrefix(c.dirs[ctrl], mountpoint+"/"+ctrl)
		if h.Version == 2 {
			want = "0::" + strings.TrimPrefix(c.dirs[""], mountpoint)
		}
		if !strings.Contains("\n"+string(b), want+"\n") {
			t.Errorf("/proc/self/cgroup of the command:\n%s\nlacks %q", b, want)
		}
		if c.OOMKilled() {
			t.Error("OOMKilled without a kill")
		}
		c.Release()
	})
	t.Run("pids", func(t *testing.T) {
		// 12 background sleeps under a limit of 8: the fork of some fails
		// (counted by the kernel in pids.events), and no more than 8
		// processes are ever in the child.
		c, _, _ := run(Limits{PIDs: 8}, "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 30 & done 2>/dev/null")
		defer c.Release()
		defer c.Signal(syscall.SIGKILL)
		d := c.dirs["pids"]
		if h.Version == 2 {
			d = c.dirs[""]
		}
		if n := readCounter(filepath.Join(d, "pids.events"), "max"); n == 0 {
			t.Error("pids.events max = 0: no fork was refused under a limit of 8")
		}
		if n := c.Signal(0); n > 8 || n == 0 {
			t.Errorf("%d processes in a child limited to 8", n)
		}
	})
	t.Run("oom", func(t *testing.T) {
		c, _, err := run(Limits{Memory: 32 << 20}, "dd if=/dev/zero of=/dev/null bs=128M count=1")
		if err == nil {
			t.Fatal("dd of 128 MiB under 32 MiB succeeded")
		}
		if !c.OOMKilled() {
			t.Errorf("OOMKilled false after %v", err)
		}
		c.Release()
	})
	t.Run("lingering", func(t *testing.T) {
		c, _, _ := run(Limits{}, "setsid sleep 30 </dev/null >/dev/null 2>&1 &")
		if n := c.Signal(0); n != 1 {
			t.Errorf("%d processes left, want the daemon", n)
		}
		c.Release()
		tree.Close()
		if n := c.Signal(0); n != 0 {
			t.Errorf("%d processes after Tree.Close", n)
		}
	})
}

// returnThreads moves every thread of this process back to the v1
// cgroups of orig (a /proc/self/cgroup), for each controller of dirs.
func returnThreads(dirs map[string]string, orig []byte) {
	tasks, _ := os.ReadDir("/proc/self/task")
	for line := range strings.SplitSeq(strings.TrimSpace(string(orig)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for ctrl := range dirs {
			if f[1] != ctrl {
				continue
			}
			for _, task := range tasks {
				_ = os.WriteFile(filepath.Join("/sys/fs/cgroup", ctrl, f[2], "tasks"), []byte(task.Name()), 0)
			}
		}
	}
}
