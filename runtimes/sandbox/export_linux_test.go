package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Leftovers returns what the host holds for s while it lives: its cgroup
// directories, its state directory, its init's root directory and its
// temporary workspace (last). Tests
// check they are gone after Close.
func Leftovers(s *Sandbox) []string {
	var out []string
	for _, d := range s.cg.Dirs() {
		out = append(out, d)
	}
	out = append(out, s.dir, s.initRoot)
	if s.temp != "" {
		out = append(out, s.temp)
	}
	return out
}

// InitPID is the host PID of s's init.
func InitPID(s *Sandbox) int { return s.init.cmd.Process.Pid }

// AgentPID is the host PID of s's agent, the init's only child.
func AgentPID(s *Sandbox) (int, error) {
	pid := InitPID(s)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("init %d has no child", pid)
	}
	return strconv.Atoi(f[0])
}

// NewWithSlots is New with the uid slots reserved in slots instead of
// the machine's registry (MachineSlots): a test that breaks slot
// handling on purpose touches no other process's sandboxes. It should
// use a UIDBase of its own as well.
func NewWithSlots(opts Options, slots string) *Runtime {
	r := New(opts)
	r.st.slots = slots
	return r
}
