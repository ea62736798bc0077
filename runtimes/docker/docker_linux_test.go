package docker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/execboxtest"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/docker"
)

// shared is what the tests of this package share for the life of the
// test binary: a directory (the static agent, state directories) and the
// tools image loaded into the engine. TestMain removes both.
var shared struct {
	once  sync.Once
	dir   string
	agent string
	tag   string
	err   error
}

func TestMain(m *testing.M) {
	code := testutil.LeakCheck(m.Run())
	if shared.tag != "" {
		_ = imagetest.DockerRemove(context.Background(), shared.tag)
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// setup builds the static agent and loads the tools image, once.
func setup(t testing.TB) {
	t.Helper()
	testutil.Require(t, testutil.Root, testutil.Docker, testutil.StaticAgent)
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "execbox-docker-test-"); shared.err != nil {
			return
		}
		if shared.agent, shared.err = testutil.StaticExecbox(shared.dir); shared.err != nil {
			return
		}
		img, err := imagetest.ToolImage()
		if err != nil {
			shared.err = err
			return
		}
		d, err := img.Digest()
		if err != nil {
			shared.err = err
			return
		}
		// A tag of this test binary's own: other packages' tests load
		// the same image at the same time, and remove theirs when done.
		tag := fmt.Sprintf("execbox-test/tools:%s-%d", d.Hex[:12], os.Getpid())
		if shared.err = imagetest.DockerLoad(context.Background(), img, tag); shared.err == nil {
			shared.tag = tag
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
}

// newRuntime is a docker runtime with the test's agent and image, and a
// state directory of the test's own.
func newRuntime(t testing.TB, opts docker.Options) *docker.Runtime {
	t.Helper()
	setup(t)
	if opts.AgentBinary == "" {
		opts.AgentBinary = shared.agent
	}
	if opts.Image == "" {
		opts.Image = shared.tag
	}
	if opts.StateDir == "" {
		opts.StateDir = filepath.Join(t.TempDir(), "state")
	}
	rt, err := docker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if h := rt.Health(t.Context()); !h.Available {
		t.Fatalf("docker runtime unavailable: %s", h.Detail)
	}
	return rt
}

func engine(t testing.TB) *client.Client {
	t.Helper()
	dc, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	return dc
}

// checkGone checks that a closed sandbox's container is gone.
func checkGone(t *testing.T, sb execbox.Sandbox) {
	t.Helper()
	s := sb.(*docker.Sandbox)
	_, err := engine(t).ContainerInspect(context.Background(), s.ContainerID(), client.ContainerInspectOptions{})
	if err == nil {
		t.Errorf("container %.12s still exists after Close", s.ContainerID())
	}
}

func TestConformance(t *testing.T) {
	rt := newRuntime(t, docker.Options{})
	t.Run("conformance", func(t *testing.T) {
		execboxtest.Run(t, execboxtest.Config{Runtime: rt, Slack: 3 * time.Second, AfterClose: checkGone})
	})
	t.Run("sessions", func(t *testing.T) {
		execboxtest.RunSessions(t, execboxtest.Config{Runtime: rt, Slack: 3 * time.Second, AfterClose: checkGone})
	})
}

// TestCreateErrors: a spec the runtime cannot honour fails before
// anything is made, naming the field.
func TestCreateErrors(t *testing.T) {
	setup(t)
	state := filepath.Join(t.TempDir(), "state")
	rt, err := docker.New(docker.Options{AgentBinary: shared.agent, StateDir: state, Pull: docker.PullNever})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec  execbox.Spec
		field string
		kind  error
	}{
		{execbox.Spec{}, "image", execbox.ErrInvalidArgument},
		{execbox.Spec{Image: "execbox-test/no-such-image:1"}, "image", execbox.ErrNotFound},
		{execbox.Spec{Image: "./layout:tag"}, "image", execbox.ErrUnsupported},
		{execbox.Spec{Image: shared.tag, Limits: execbox.Limits{Memory: 1 << 30}}, "limits.memory", execbox.ErrUnsupported},
		{execbox.Spec{Image: shared.tag, Workspace: "/nonexistent-execbox"}, "workspace", execbox.ErrInvalidArgument},
		{execbox.Spec{Image: shared.tag, Workspace: "/etc"}, "workspace", execbox.ErrPermission},
	} {
		sb, err := rt.Create(t.Context(), tc.spec)
		if err == nil {
			sb.Close()
			t.Errorf("Create(%+v) succeeded", tc.spec)
			continue
		}
		var fe *execbox.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, tc.kind) {
			t.Errorf("Create(%+v): %v, want a %v naming %s", tc.spec, err, tc.kind, tc.field)
		}
	}
	if _, err := docker.New(docker.Options{Pull: "sometimes"}); err == nil || !strings.Contains(err.Error(), "runtimes.docker.pull") {
		t.Errorf("New with a bad pull policy: %v", err)
	}
	entries, _ := os.ReadDir(state)
	if len(entries) != 0 {
		t.Errorf("failed Creates left %d state directories", len(entries))
	}
}

// TestImageUser: commands run as the image's user, a name looked up in
// the image's own /etc/passwd; the spec's user overrides it; the agent
// stays root and out of the commands' reach.
func TestImageUser(t *testing.T) {
	rt := newRuntime(t, docker.Options{})
	tag := shared.tag + "-user"
	img, err := imagetest.ToolImage()
	if err != nil {
		t.Fatal(err)
	}
	img, err = imagetest.WithUser(img, "app", 4321, 4322)
	if err != nil {
		t.Fatal(err)
	}
	if err := imagetest.DockerLoad(t.Context(), img, tag); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { imagetest.DockerRemove(context.Background(), tag) })

	sb, err := rt.Create(t.Context(), execbox.Spec{Image: tag})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "id -u; id -g; stat -c %u /workspace; touch /workspace/f && echo wrote; ls /.execbox/run 2>&1 >/dev/null | head -c 0; test -r /.execbox/run/agent.json || echo no-config"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Stdout.String(), "4321\n4322\n4321\nwrote\nno-config\n"; got != want {
		t.Errorf("as the image's user: %q, want %q (%s)", got, want, res.String())
	}
	sb2, err := rt.Create(t.Context(), execbox.Spec{Image: tag, User: &execbox.User{UID: 7, GID: 8}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb2.Close()
	res, err = sb2.Exec(t.Context(), execbox.ExecRequest{Shell: "id -u; id -g"})
	if err != nil || res.Stdout.String() != "7\n8\n" {
		t.Errorf("the spec's user: %q, %v", res.Stdout.String(), err)
	}
}

// TestAgentOutOfReach: the agent is the container's init, so a command
// running as root there can neither stop nor kill it with any signal;
// its Exec ends in a result and the sandbox goes on working.
func TestAgentOutOfReach(t *testing.T) {
	rt := newRuntime(t, docker.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer checkGone(t, sb)
	defer sb.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if res, err := sb.Exec(ctx, execbox.ExecRequest{Command: []string{"cat", "/proc/1/cmdline"}}); err != nil || !strings.HasPrefix(res.Stdout.String(), "/.execbox/agent\x00") {
		t.Fatalf("PID 1 is %q (%v), want the agent", res.Stdout.String(), err)
	}
	for _, script := range []string{
		"kill -STOP 1; echo sent",
		"kill -KILL 1; echo sent",
		"kill -KILL -1; echo sent",
		"for s in HUP INT QUIT ILL TRAP ABRT BUS FPE USR1 SEGV USR2 PIPE ALRM TERM STKFLT TSTP TTIN TTOU XCPU XFSZ VTALRM WINCH IO PWR SYS; do kill -$s 1; done; echo sent",
	} {
		res, err := sb.Exec(ctx, execbox.ExecRequest{Shell: script, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		if res.Stdout.String() != "sent\n" && script != "kill -KILL -1; echo sent" {
			t.Errorf("%s: %s %q %q", script, res.String(), res.Stdout.String(), res.Stderr.String())
		}
		res, err = sb.Exec(ctx, execbox.ExecRequest{Command: []string{"echo", "alive"}, Timeout: 10 * time.Second})
		if err != nil || res.Stdout.String() != "alive\n" {
			t.Fatalf("after %q: %q, %v", script, res.Stdout.String(), err)
		}
	}
}

// TestOrphansReaped: processes orphaned by commands are reaped by the
// agent (the container's init), not left as zombies holding PIDs.
func TestOrphansReaped(t *testing.T) {
	rt := newRuntime(t, docker.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// Each command leaves an orphan that exits a moment later.
	for range 20 {
		if _, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "(sleep 0.1 &) ; true"}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "grep -l '^State:.*Z' /proc/[0-9]*/status | wc -l"})
		return err == nil && strings.TrimSpace(res.Stdout.String()) == "0"
	}, "no zombie in the container")
}

// TestContainerKilled: when the container dies under the sandbox (killed
// from outside), calls fail at once with ErrUnavailable saying why, never
// hang; Close still removes everything.
func TestContainerKilled(t *testing.T) {
	rt := newRuntime(t, docker.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer checkGone(t, sb)
	defer sb.Close()
	p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine(t).ContainerKill(t.Context(), sb.(*docker.Sandbox).ContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); !errors.Is(err, execbox.ErrUnavailable) || !strings.Contains(err.Error(), "agent is gone") {
		t.Errorf("Wait on a process of a killed container: %v, want ErrUnavailable saying the agent is gone", err)
	}
	_, err = sb.Exec(ctx, execbox.ExecRequest{Command: []string{"true"}})
	if !errors.Is(err, execbox.ErrUnavailable) || !strings.Contains(err.Error(), "exited with code 137") {
		t.Errorf("Exec in a killed container: %v, want ErrUnavailable with the exit code", err)
	}
	if ctx.Err() != nil {
		t.Fatal("calls hung until the deadline")
	}
	if err := sb.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestHostile: a command filling the workspace and a fork bomb end in
// results or a clear error, never a hung call or a leaked container.
func TestHostile(t *testing.T) {
	rt := newRuntime(t, docker.Options{PIDs: 128, WorkspaceSize: 16 << 20})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer checkGone(t, sb)
	defer sb.Close()
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "dd if=/dev/zero of=big bs=1M count=32 2>&1; echo $?; du -k big; rm big"})
	out := res.Stdout.String()
	if err != nil || !strings.Contains(out, "No space left") || strings.Contains(out, "\n0\n") {
		t.Errorf("filling a 16 MiB workspace: %s %q, %v; want ENOSPC", res.String(), out, err)
	}
	start := time.Now()
	res, err = sb.Exec(t.Context(), execbox.ExecRequest{Shell: "f() { f | f & }; f; sleep 30", Timeout: 3 * time.Second})
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("fork bomb took %v", d)
	}
	if err != nil {
		// The bomb shares the container's pids with the agent, which
		// keeps threads in reserve but can still fail to make one (the
		// Go runtime does not survive that): a clear error, then.
		if !errors.Is(err, execbox.ErrUnavailable) || !strings.Contains(err.Error(), "agent is gone") {
			t.Fatalf("fork bomb: %v, want a result or ErrUnavailable saying the agent is gone", err)
		}
		t.Logf("the agent died under the fork bomb: %.200s", err)
		return
	}
	// The timeout ends it, or the shell itself when it cannot fork its
	// sleep: a result either way, and nothing of the bomb left.
	if res.Success() {
		t.Errorf("fork bomb: %s, want a timeout or a failure", res.String())
	}
	res, err = sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"echo", "still here"}})
	if err != nil || res.Stdout.String() != "still here\n" {
		t.Errorf("after the fork bomb: %q, %v", res.Stdout.String(), err)
	}
}

// TestSweep: the containers of a process that died without closing its
// sandboxes are removed by a sweep, with their state directories. The
// process is this test binary, re-executed: it creates a sandbox and
// exits.
func TestSweep(t *testing.T) {
	if os.Getenv("EXECBOX_DOCKER_TEST_ORPHAN") != "" {
		orphan()
		return
	}
	rt := newRuntime(t, docker.Options{})
	state := filepath.Join(t.TempDir(), "orphans")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweep$")
	cmd.Env = append(os.Environ(), "EXECBOX_DOCKER_TEST_ORPHAN="+state, "EXECBOX_DOCKER_TEST_IMAGE="+shared.tag, "EXECBOX_DOCKER_TEST_AGENT="+shared.agent)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the orphaning process: %v", err)
	}
	cid, _, _ := strings.Cut(string(out), "\n")
	dc := engine(t)
	if _, err := dc.ContainerInspect(t.Context(), cid, client.ContainerInspectOptions{}); err != nil {
		t.Fatalf("the orphan's container %q: %v (output %q)", cid, err, out)
	}
	t.Cleanup(func() { dc.ContainerRemove(context.Background(), cid, client.ContainerRemoveOptions{Force: true}) })
	sweeper, err := docker.New(docker.Options{StateDir: state, AgentBinary: shared.agent})
	if err != nil {
		t.Fatal(err)
	}
	n, err := sweeper.Sweep(t.Context())
	if err != nil || n < 1 {
		t.Errorf("Sweep = %d, %v; want the orphan removed", n, err)
	}
	if _, err := dc.ContainerInspect(t.Context(), cid, client.ContainerInspectOptions{}); err == nil {
		t.Errorf("the orphan's container %.12s survived the sweep", cid)
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("the sweep left %d state directories", len(entries))
	}
	_ = rt
}

// orphan is TestSweep's child: it creates a sandbox, prints its
// container's ID and exits without closing it.
func orphan() {
	rt, err := docker.New(docker.Options{StateDir: os.Getenv("EXECBOX_DOCKER_TEST_ORPHAN"),
		Image: os.Getenv("EXECBOX_DOCKER_TEST_IMAGE"), AgentBinary: os.Getenv("EXECBOX_DOCKER_TEST_AGENT")})
	if err == nil {
		var sb execbox.Sandbox
		if sb, err = rt.Create(context.Background(), execbox.Spec{}); err == nil {
			os.Stdout.WriteString(sb.(*docker.Sandbox).ContainerID() + "\n")
			os.Exit(0)
		}
	}
	os.Stderr.WriteString(err.Error() + "\n")
	os.Exit(1)
}

// TestCodeRunner: package code finds the image's Python through the
// agent and runs a program with it.
func TestCodeRunner(t *testing.T) {
	rt := newRuntime(t, docker.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := code.Run(t.Context(), sb, code.Request{Language: code.Python, Source: "import sys\nprint(2+2, sys.version_info[0])"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Stdout.String(); got != "4 3\n" {
		t.Errorf("Python in the image: %q (%s)", got, res.String())
	}
}

// TestCLI: `execbox exec --runtime docker --image IMAGE -- argv` with a
// static execbox, which is its own agent in the container: the output,
// the exit code, and no container left.
func TestCLI(t *testing.T) {
	setup(t)
	state := filepath.Join(t.TempDir(), "state")
	conf := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(conf, []byte("runtimes:\n  docker:\n    pull: never\n    state_dir: "+state+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	cmd := exec.CommandContext(t.Context(), shared.agent, "exec", "--runtime", "docker", "--image", shared.tag, "--workspace", ws,
		"--", "sh", "-c", `echo "$(id -u) $(pwd)"; echo made > file; exit 3`)
	cmd.Env = append(os.Environ(), "EXECBOX_CONFIG="+conf)
	cmd.Dir = ws
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if got, code := out.String(), cmd.ProcessState.ExitCode(); got != "0 /workspace\n" || code != 3 {
		t.Errorf("execbox exec: %q, exit %d; want %q, exit 3", got, code, "0 /workspace\n")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "file")); err != nil || string(b) != "made\n" {
		t.Errorf("the workspace's file: %q, %v", b, err)
	}
	list, err := engine(t).ContainerList(t.Context(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", "dev.execbox.runtime=docker")})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		if strings.HasPrefix(c.Labels["dev.execbox.state"], state+"/") {
			t.Errorf("container %.12s left after execbox exec", c.ID)
		}
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("execbox exec left %d state directories", len(entries))
	}
}
