package agent

import "os"

// bashPaths are where a sandbox's bash is looked for, in order.
var bashPaths = []string{"/bin/bash", "/usr/bin/bash"}

// Shell returns the program that runs a shell-form command and its name:
// bash where the sandbox's root has it, since the agents that write
// these lines write them for bash ([[, source, set -o pipefail,
// arrays), else /bin/sh. It looks every time, at the cost of a stat: a
// command may install bash, and an image's root may lack it.
func Shell() (path, name string) {
	for _, p := range bashPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, "bash"
		}
	}
	return "/bin/sh", "sh"
}
