package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
)

// The test binary runs as execbox itself when this variable is set, so
// these tests exercise main's real signal handling without a build step.
const helperEnv = "EXECBOX_TEST_MAIN_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Args = append([]string{"execbox"}, os.Args[1:]...)
		main()
		return
	}
	os.Exit(m.Run())
}

// command returns the test binary set up to run as execbox with args.
func command(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	// local: the tests look for the command's processes by host PID.
	cmd.Env = append(os.Environ(), helperEnv+"=1", "EXECBOX_RUNTIME=local")
	cmd.Stderr = &strings.Builder{}
	return cmd
}

// TestSignals sends execbox a signal while its command (with a grandchild)
// runs, and checks the exit code and that nothing the command started
// survives.
func TestSignals(t *testing.T) {
	for _, tt := range []struct {
		sig  syscall.Signal
		code int
	}{
		{syscall.SIGINT, 130},
		{syscall.SIGTERM, 143},
	} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cmd := command(t, "exec", "--config=", "--workspace", dir, "--grace-period", "200ms", "--",
				"sh", "-c", "sleep 300 & echo $! > pid; wait")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := testutil.WaitPIDFile(t, filepath.Join(dir, "pid"))
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != tt.code {
					t.Errorf("execbox ended with %v, want exit code %d; stderr %q", err, tt.code, cmd.Stderr)
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatal("execbox did not exit after the signal")
			}
			if testutil.Alive(pid) {
				t.Errorf("grandchild %d survived", pid)
			}
		})
	}
}

// TestClosedStdout checks that a reader going away (execbox exec -- yes |
// head) stops the command and exits 141, as a pipeline's writer would.
func TestClosedStdout(t *testing.T) {
	t.Parallel()
	cmd := command(t, "exec", "--config=", "--temp-workspace", "--", "yes")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "y\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	out.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 141 {
			t.Errorf("execbox ended with %v, want exit code 141; stderr %q", err, cmd.Stderr)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("execbox did not exit after its stdout closed")
	}
}

// TestInheritedDescriptor is `execbox exec ... 7</`: a descriptor the
// shell gave execbox without close-on-exec must not reach the command,
// which could otherwise list and write the host's / through
// /proc/self/fd/7 (the class of runc's CVE-2024-21626), whatever the
// runtime.
func TestInheritedDescriptor(t *testing.T) {
	for _, rt := range []string{"local", "sandbox"} {
		t.Run(rt, func(t *testing.T) {
			if rt == "sandbox" {
				testutil.Require(t, testutil.Root, testutil.UserNamespaces, testutil.CgroupV1orV2)
			}
			root, err := os.Open("/")
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			probe := "p=/proc/self/fd/7; if [ -e $p ]; then echo leaked: $(readlink $p); ls $p/ | head -3; fi"
			cmd := command(t, "exec", "--runtime", rt, "--temp-workspace", "--", "sh", "-c", probe)
			cmd.ExtraFiles = []*os.File{nil, nil, nil, nil, root} // fd 7, as the shell's 7</
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("execbox exec: %v\n%s", err, cmd.Stderr)
			}
			if len(out) != 0 {
				t.Errorf("descriptor 7 reached the command:\n%s", out)
			}
		})
	}
}
