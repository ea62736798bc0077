package testutil

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// WaitPIDFile polls until path holds a process ID (written by a command
// under test) and returns it; it fails the test after 30 s.
func WaitPIDFile(t testing.TB, path string) int {
	t.Helper()
	var pid int
	Eventually(t, 30*time.Second, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, "no pid in %s", path)
	return pid
}

// Alive reports whether pid is a running process (not a zombie), as the
// host sees it.
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which may hold ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
