//go:build linux

package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/testutil"
)

// TestServeRestartLeavesNothing is issue 15's restart test: execbox serve
// holds several sandboxes with running commands (one daemonized with
// setsid, one a bash session), is killed with SIGKILL, and restarted
// with the same state directories. The restarted server must have
// removed everything the first one left (processes, cgroups, mounts,
// temporary workspaces, records) before it serves, and answer the lost
// IDs with "closed", naming the restart.
func TestServeRestartLeavesNothing(t *testing.T) {
	t.Run("local", func(t *testing.T) { testServeRestart(t, "local") })
	t.Run("sandbox", func(t *testing.T) {
		testutil.Require(t, testutil.Root, testutil.UserNamespaces, testutil.CgroupV1orV2)
		testServeRestart(t, "sandbox")
	})
	t.Run("docker", func(t *testing.T) {
		testutil.Require(t, testutil.Root, testutil.Docker, testutil.StaticAgent, testutil.Command("docker"))
		testServeRestart(t, "docker")
	})
}

// dockerSettings builds a static agent and loads the tools image for
// the docker runtime, removed at the end of the test.
func dockerSettings(t *testing.T) string {
	bin, err := staticAgent()
	if err != nil {
		t.Fatal(err)
	}
	img, err := imagetest.ToolImage()
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("execbox-test/restart:%d", os.Getpid())
	if err := imagetest.DockerLoad(t.Context(), img, tag); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = imagetest.DockerRemove(context.Background(), tag) })
	return fmt.Sprintf("    agent_binary: %s\n    image: %s\n", bin, tag)
}

// restartEnv is one restart test's directories: its own, so that test
// packages running at once never share a state directory.
type restartEnv struct {
	dir, tmp, config string
	docker           bool // look for containers too
}

func newRestartEnv(t *testing.T, runtime string) restartEnv {
	// Not below t.TempDir, whose private directory a sandbox's root could
	// not traverse.
	dir, err := os.MkdirTemp("", "execbox-restart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	e := restartEnv{dir: dir, tmp: filepath.Join(dir, "tmp"), config: filepath.Join(dir, "execbox.yaml"), docker: runtime == "docker"}
	if err := os.Mkdir(e.tmp, 0o711); err != nil {
		t.Fatal(err)
	}
	extra := ""
	if runtime == "docker" {
		extra = dockerSettings(t)
	}
	yaml := fmt.Sprintf("runtimes:\n  %s:\n    state_dir: %s\n%sserver:\n  state_dir: %s\n",
		runtime, filepath.Join(dir, "rtstate"), extra, filepath.Join(dir, "srvstate"))
	if err := os.WriteFile(e.config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// serve starts execbox serve of runtime in e.
func (e restartEnv) serve(t *testing.T, runtime string) (*exec.Cmd, *client.Client) {
	cmd, url := startServeProcess(t, []string{"TMPDIR=" + e.tmp},
		"--config="+e.config, "--runtime", runtime, "--listen", "127.0.0.1:0", "--no-auth")
	c, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return cmd, c
}

func testServeRestart(t *testing.T, runtime string) {
	e := newRestartEnv(t, runtime)
	start := time.Now()
	cmd, c := e.serve(t, runtime)
	first := time.Since(start)
	ctx := t.Context()
	var ids []string
	for range 3 {
		sb, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID())
		if _, err := sb.Start(ctx, execbox.ExecRequest{Command: []string{"sleep", "300"}}); err != nil {
			t.Fatal(err)
		}
		// A daemon: setsid, in the background, its parent gone.
		res, err := sb.Exec(ctx, execbox.ExecRequest{Shell: "setsid sleep 301 </dev/null >/dev/null 2>&1 &"})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("daemon: %v, %+v", err, res)
		}
		sess, err := sb.OpenSession(ctx, execbox.SessionOptions{Kind: execbox.SessionBash})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sess.Run(ctx, execbox.SessionRequest{Code: "sleep 302 &"}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { killLeftovers(t, ids, e) })
	before := leftovers(ids, e)
	if e.docker && len(before.containers) != len(ids) {
		t.Fatalf("%d containers of the sandboxes found before the kill, want %d", len(before.containers), len(ids))
	}
	if len(before.procs) < 3*len(ids) {
		t.Fatalf("%d processes of the sandboxes found before the kill, want at least %d: %+v", len(before.procs), 3*len(ids), before)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// What the killed server left, once its children got their Pdeathsig.
	testutil.Eventually(t, 5*time.Second, func() bool { return childrenOf(cmd.Process.Pid) == 0 },
		"the killed server's children to die with it")
	t.Logf("%s runtime, left by execbox serve killed with SIGKILL: %s", runtime, leftovers(ids, e))

	start = time.Now()
	_, c2 := e.serve(t, runtime)
	t.Logf("execbox serve started in %v with nothing to sweep, %v after the kill (sweep included)", first, time.Since(start))
	var left found
	if !testutil.Poll(ctx, 5*time.Second, func() bool { left = leftovers(ids, e); return left.empty() }) {
		t.Errorf("left after the restart: %s", left)
	}
	for i, id := range ids {
		_, err := c2.Sandbox(ctx, id)
		if i == 0 {
			t.Logf("a lost sandbox, after the restart: %v", err)
		}
		if !errors.Is(err, execbox.ErrClosed) || !strings.Contains(err.Error(), "lost") {
			t.Errorf("sandbox %s after the restart: %v; want ErrClosed saying it was lost", id, err)
		}
	}
}

// found is what of some sandboxes is left on the machine.
type found struct {
	procs, cgroups, mounts, temps, records, containers []string
}

func (f found) empty() bool {
	return len(f.procs)+len(f.cgroups)+len(f.mounts)+len(f.temps)+len(f.records)+len(f.containers) == 0
}

func (f found) String() string {
	return fmt.Sprintf("%d processes %q, %d cgroups %q, %d mounts %q, %d temporary directories %q, %d state records %q, %d containers %q",
		len(f.procs), f.procs, len(f.cgroups), f.cgroups, len(f.mounts), f.mounts, len(f.temps), f.temps, len(f.records), f.records,
		len(f.containers), f.containers)
}

// leftovers finds what of the sandboxes ids is on the machine:
// processes marked with their IDs (EXECBOX_TRACE) or in their cgroups,
// their cgroup directories, mounts naming them, entries of e's temporary
// directory, and records in the runtime's state directory.
func leftovers(ids []string, e restartEnv) found {
	var f found
	names := func(b []byte) bool {
		return slices.ContainsFunc(ids, func(id string) bool { return bytes.Contains(b, []byte(id)) })
	}
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range pids {
		env, _ := os.ReadFile(p + "/environ")
		cg, _ := os.ReadFile(p + "/cgroup")
		if names(env) || names(cg) {
			comm, _ := os.ReadFile(p + "/comm")
			f.procs = append(f.procs, filepath.Base(p)+":"+strings.TrimSpace(string(comm)))
		}
	}
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Count(p, "/") > 7 {
			return fs.SkipDir
		}
		if names([]byte(d.Name())) {
			f.cgroups = append(f.cgroups, p)
			return fs.SkipDir
		}
		return nil
	})
	mi, _ := os.ReadFile("/proc/1/mountinfo")
	for l := range strings.Lines(string(mi)) {
		if names([]byte(l)) {
			f.mounts = append(f.mounts, strings.Fields(l)[4])
		}
	}
	tmps, _ := os.ReadDir(e.tmp)
	for _, d := range tmps {
		f.temps = append(f.temps, d.Name())
	}
	recs, _ := filepath.Glob(filepath.Join(e.dir, "*state", "sb-*"))
	f.records = append(f.records, recs...)
	if e.docker {
		for _, id := range ids {
			out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=dev.execbox.sandbox="+id).Output()
			f.containers = append(f.containers, strings.Fields(string(out))...)
		}
	}
	return f
}

// killLeftovers kills, after a failed test, the processes of ids it
// finds, so that the test leaves nothing even then.
func killLeftovers(t *testing.T, ids []string, e restartEnv) {
	left := leftovers(ids, e)
	for _, c := range left.containers {
		t.Logf("removing leftover container %s", c)
		_ = exec.Command("docker", "rm", "-f", c).Run()
	}
	for _, p := range left.procs {
		pid, _ := strconv.Atoi(strings.Split(p, ":")[0])
		if pid > 1 && pid != os.Getpid() {
			t.Logf("killing leftover process %s", p)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// childrenOf counts the live processes whose parent is pid.
func childrenOf(pid int) int {
	n := 0
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		i := bytes.LastIndexByte(b, ')')
		if err != nil || i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[0] != "Z" && f[1] == strconv.Itoa(pid) {
			n++
		}
	}
	return n
}
