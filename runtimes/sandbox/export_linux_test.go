package sandbox

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
