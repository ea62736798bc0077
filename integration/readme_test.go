//go:build integration

// Package integration runs the execbox binary end to end, the way the
// README tells people to use it. The binary is built once per run.
package integration

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "execbox-integration-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "execbox")
	build := exec.Command("go", "build", "-o", binary, "../cmd/execbox")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		panic("build execbox: " + err.Error())
	}
	// A run without a workspace keeps caches in XDG_CACHE_HOME: the
	// tests' own (mode 0755: a sandbox's init starts the static agent
	// from there as an unprivileged uid).
	cache := filepath.Join(dir, "cache")
	if err := os.Mkdir(cache, 0o755); err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755)
	os.Setenv("XDG_CACHE_HOME", cache)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run runs the binary in a fresh directory and returns stdout, stderr and
// the exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runBinary(t, binary, args...)
}

// runBinary is run with the program bin.
func runBinary(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("execbox %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out.String(), errb.String())
	return out.String(), errb.String(), code
}

// TestReadmeCommands runs the commands the README's quick start shows.
func TestReadmeCommands(t *testing.T) {
	tests := []struct {
		args     []string
		stdout   string
		exitCode int
	}{
		{[]string{"run", "--lang", "python", "-c", "print(2+2)"}, "4\n", 0},
		{[]string{"exec", "--", "sh", "-c", "echo hi; exit 3"}, "hi\n", 3},
		{[]string{"exec", "--timeout", "1s", "--", "sleep", "10"}, "", 124},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			stdout, _, code := run(t, tt.args...)
			if stdout != tt.stdout || code != tt.exitCode {
				t.Errorf("got stdout %q exit %d, want %q exit %d", stdout, code, tt.stdout, tt.exitCode)
			}
		})
	}
}

func TestHealthListsLocal(t *testing.T) {
	stdout, _, code := run(t, "health")
	if code != 0 || !strings.Contains(stdout, "local") {
		t.Errorf("health: exit %d, stdout %q", code, stdout)
	}
}

func TestErrorIsOneLine(t *testing.T) {
	_, stderr, code := run(t, "exec", "--runtime", "nope", "--", "true")
	if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, `unknown runtime "nope"`) {
		t.Errorf("exit %d, stderr %q: want one line naming the runtime, exit 2", code, stderr)
	}
}
