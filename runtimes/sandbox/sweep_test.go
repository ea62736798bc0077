//go:build linux

package sandbox_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// ownerEnv makes the test binary sweepOwner, the owner of a sandbox, in a process
// the test kills with SIGKILL.
const ownerEnv = "EXECBOX_SANDBOX_TEST_OWNER"

// sweepOwner is TestSweep's child process (the test binary, from
// TestMain, with ownerEnv set): it creates a sandbox with a command
// running in it, prints its ID and waits to be killed.
func sweepOwner(stateDir string) {
	ctx := context.Background()
	rt := sandbox.New(sandbox.Options{StateDir: stateDir})
	sb, err := rt.Create(ctx, execbox.Spec{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	if _, err := sb.Start(ctx, execbox.ExecRequest{Command: []string{"sleep", "300"}}); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("ready", sb.ID())
	select {}
}

// TestSweep kills an execbox process that owns a sandbox with SIGKILL,
// and checks that the sandbox's processes die with it and that a new
// runtime removes the rest: cgroup, state directory, temporary workspace.
func TestSweep(t *testing.T) {
	requireSandbox(t, sandbox.Options{})
	// Not below t.TempDir, whose private directory the sandbox's root
	// could not traverse.
	parent, err := os.MkdirTemp("", "execbox-sweep-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	os.Chmod(parent, 0o711)
	stateDir := filepath.Join(parent, "state")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), ownerEnv+"="+stateDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var id string
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "ready" {
			id = f[1]
			break
		} else if len(f) > 0 && f[0] == "error" {
			t.Fatal(sc.Text())
		}
	}
	if id == "" {
		cmd.Process.Kill()
		t.Fatal("the helper did not create a sandbox")
	}
	b, err := os.ReadFile(filepath.Join(stateDir, id, "owner.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec := string(b)
	cmd.Process.Kill()
	cmd.Wait()

	// The init died with its owner (Pdeathsig), and the PID namespace with it.
	testutil.Eventually(t, 5*time.Second, func() bool { return sandboxProcs(t, id) == 0 },
		"the sandbox's processes to die with their owner")

	rt := sandbox.New(sandbox.Options{StateDir: stateDir, Logger: testutil.Logger(t)})
	n, err := rt.Sweep(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1 sandbox removed", n, err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, id)); !os.IsNotExist(err) {
		t.Errorf("state directory of %s left after Sweep: %v", id, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), "execbox-"+id) {
		t.Errorf("a mount of %s is left after Sweep", id)
	}
	for _, field := range strings.Split(rec, "\"") {
		if strings.HasPrefix(field, "/sys/fs/cgroup/") || strings.HasPrefix(field, os.TempDir()) {
			if _, err := os.Stat(field); !os.IsNotExist(err) {
				t.Errorf("%s left after Sweep (%v)", field, err)
			}
		}
	}
}

// sandboxProcs counts host processes whose cgroup names the sandbox.
func sandboxProcs(t *testing.T, id string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err == nil && strings.Contains(string(b), "/"+id) {
			n++
		}
	}
	return n
}

// TestSweepUnrecorded: an execbox process that dies between making a
// sandbox's temporary workspace or init root and recording it leaves
// them in the temporary directory, named after the sandbox but in no
// record. A sweep removes them with the sandbox's state directory, and
// nothing of another sandbox. Before, nothing ever removed them.
func TestSweepUnrecorded(t *testing.T) {
	testutil.Require(t, testutil.Root)
	parent, err := os.MkdirTemp("", "execbox-sweep-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	stateDir, tmp := filepath.Join(parent, "state"), filepath.Join(parent, "tmp")
	rt := sandbox.NewWithSlots(sandbox.Options{StateDir: stateDir, TempDir: tmp, Logger: testutil.Logger(t)},
		filepath.Join(stateDir, ".slots"))
	// A dead owner: a process that has exited.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	const id, other = "sb-0123456789ab", "sb-ba9876543210"
	mkdirs(t, filepath.Join(stateDir, id), filepath.Join(stateDir, ".slots"),
		filepath.Join(tmp, "execbox-"+id+"-root-1", "root"), filepath.Join(tmp, "execbox-"+id+"-2", "ws"),
		filepath.Join(tmp, "execbox-"+other+"-root-3", "root"))
	rec := fmt.Sprintf(`{"id":%q,"owner":%d,"owner_start":1,"slot":7}`, id, dead.Process.Pid)
	if err := os.WriteFile(filepath.Join(stateDir, id, "owner.json"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := rt.Sweep(t.Context()); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1 sandbox removed", n, err)
	}
	for _, p := range []string{filepath.Join(stateDir, id), filepath.Join(tmp, "execbox-"+id+"-root-1"), filepath.Join(tmp, "execbox-"+id+"-2")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after Sweep (%v)", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(tmp, "execbox-"+other+"-root-3")); err != nil {
		t.Errorf("another sandbox's init root removed: %v", err)
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}
