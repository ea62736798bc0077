package local_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

// sweepEnv makes the test binary sweepOwner, the owner of a sandbox, in
// a process TestSweep kills with SIGKILL: "STATEDIR:TEMPDIR".
const sweepEnv = "EXECBOX_LOCAL_TEST_OWNER"

// sweepOwner is TestSweep's child process (the test binary, from
// TestMain, with sweepEnv set): it creates a sandbox with a daemon
// (setsid, its parent gone) writing its PID to the workspace, prints the
// sandbox's ID and waits to be killed.
func sweepOwner(dirs string) {
	ctx := context.Background()
	state, temp, _ := strings.Cut(dirs, ":")
	rt := local.New(local.Options{StateDir: state, TempDir: temp})
	sb, err := rt.Create(ctx, execbox.Spec{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	res, err := sb.Exec(ctx, execbox.ExecRequest{Shell: "setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &"})
	if err != nil || res.ExitCode != 0 {
		fmt.Println("error", err, res.ExitCode)
		os.Exit(1)
	}
	fmt.Println("ready", sb.ID(), sb.Workspace())
	select {}
}

// TestSweep: a local sandbox's daemon and temporary workspace outlive
// an owner killed with SIGKILL; Sweep removes them and the record, and
// leaves a live owner's sandbox alone.
func TestSweep(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	temp := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), sweepEnv+"="+state+":"+temp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var id, ws string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "ready" {
			id, ws = f[1], f[2]
			break
		} else if len(f) > 0 && f[0] == "error" {
			t.Fatal(sc.Text())
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if id == "" {
		t.Fatal("the helper did not create a sandbox")
	}
	pid := testutil.WaitPIDFile(t, filepath.Join(ws, "daemon.pid"))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if !testutil.Alive(pid) {
		t.Fatalf("the daemon %d died with its owner: nothing for the sweep to do", pid)
	}

	rt := local.New(local.Options{StateDir: state, TempDir: temp, Logger: testutil.Logger(t)})
	n, err := rt.Sweep(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1 sandbox removed", n, err)
	}
	live, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if n, err := rt.Sweep(t.Context()); err != nil || n != 0 {
		t.Fatalf("Sweep with a live owner = %d, %v; want 0", n, err)
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return !testutil.Alive(pid) }, "the daemon to be killed")
	for _, p := range []string{ws, filepath.Join(state, id+".json")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after Sweep: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(state, live.ID()+".json")); err != nil {
		t.Errorf("the live sandbox's record: %v", err)
	}
	if _, err := os.Stat(live.Workspace()); err != nil {
		t.Errorf("the live sandbox's workspace: %v", err)
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, live.ID()+".json")); !os.IsNotExist(err) {
		t.Errorf("the record after Close: %v", err)
	}
	_ = strconv.Itoa
}
