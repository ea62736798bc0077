package sandbox

import "os/exec"

// execSelf returns a command re-executing this binary as arg0.
func execSelf(arg0 string) *exec.Cmd {
	return &exec.Cmd{Path: "/proc/self/exe", Args: []string{arg0}}
}
