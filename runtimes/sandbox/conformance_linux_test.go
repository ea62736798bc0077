package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/execboxtest"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// requireSandbox skips (or fails under EXECBOX_TEST_REQUIRE) unless this
// machine can run the sandbox runtime, and returns one.
func requireSandbox(t testing.TB, opts sandbox.Options) *sandbox.Runtime {
	t.Helper()
	testutil.Require(t, testutil.UserNamespaces, testutil.CgroupV1orV2)
	if opts.Logger == nil {
		opts.Logger = testutil.Logger(t)
	}
	if opts.StateDir == "" {
		// A state directory of the test's own: the shared one's mode is
		// not the business of a test.
		opts.StateDir = privateStateDir(t)
	}
	rt := sandbox.New(opts)
	if h := rt.Health(t.Context()); !h.Available {
		t.Fatalf("sandbox runtime unavailable on a machine with root, user namespaces and cgroups: %s", h.Detail)
	}
	return rt
}

// insideRoot is the user a test's hostile commands run as: uid 0 inside
// where the runtime maps a uid range, or the default user rootless,
// where no other uid exists inside (Capabilities().User is false).
func insideRoot(rt *sandbox.Runtime) *execbox.User {
	if !rt.Capabilities().User {
		return nil
	}
	return &execbox.User{UID: 0, GID: 0}
}

// requireCgroupLimits fails or skips unless the runtime enforces memory
// and pids limits: rootless without a delegated cgroup subtree has
// rlimits only (testutil dependency "sandbox-cgroups").
func requireCgroupLimits(t testing.TB, rt *sandbox.Runtime) {
	t.Helper()
	caps := rt.Capabilities()
	testutil.Require(t, testutil.NewDep("sandbox-cgroups", func() error {
		if !caps.Memory || !caps.PIDs {
			return fmt.Errorf("the runtime enforces no memory or pids limit here: %s", rt.Health(context.Background()).Detail)
		}
		return nil
	}))
}

// privateStateDir returns a new state directory below a private
// temporary directory, removed at the end of the test.
func privateStateDir(t testing.TB) string {
	t.Helper()
	parent, err := os.MkdirTemp("", "execbox-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	return filepath.Join(parent, "state")
}

// checkGone fails t if anything the sandbox held on the host remains.
func checkGone(t *testing.T, sb execbox.Sandbox) {
	t.Helper()
	s, ok := sb.(*sandbox.Sandbox)
	if !ok {
		t.Fatalf("sandbox of type %T", sb)
	}
	for _, p := range sandbox.Leftovers(s) {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists after Close (%v)", p, err)
		}
	}
	pid := sandbox.InitPID(s)
	if b, err := os.ReadFile("/proc/" + itoa(pid) + "/cmdline"); err == nil && len(b) > 0 && string(b[:len(b)-1]) == "execbox-sandbox-init" {
		t.Errorf("the sandbox's init (PID %d) still runs after Close", pid)
	}
}

func TestConformance(t *testing.T) {
	rt := requireSandbox(t, sandbox.Options{})
	execboxtest.Run(t, execboxtest.Config{
		Runtime:    rt,
		Slack:      3 * time.Second,
		AfterClose: checkGone,
	})
}

// TestStreams: every byte, in the Result and the events, under load and
// behind a slow reader (execboxtest.RunStreams).
func TestStreams(t *testing.T) {
	// The agent as users run it, a static execbox: by default the
	// sandbox re-executes this test binary, whose race detector
	// multiplies the agent's memory past its cgroup's 256 MiB.
	testutil.Require(t, testutil.StaticAgent)
	bin, err := testutil.StaticExecbox(testDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := requireSandbox(t, sandbox.Options{AgentBinary: bin})
	execboxtest.RunStreams(t, execboxtest.Config{Runtime: rt, Slack: 3 * time.Second, AfterClose: checkGone, Writers: streamWriters})
}

func TestSessions(t *testing.T) {
	rt := requireSandbox(t, sandbox.Options{})
	execboxtest.RunSessions(t, execboxtest.Config{
		Runtime:    rt,
		Slack:      3 * time.Second,
		AfterClose: checkGone,
	})
}

// streamWriters is how many commands TestStreams runs at once in one
// sandbox. The agent's output memory is not yet bounded whatever the
// concurrency (issue 23): each running command's Result (1 MiB of each
// stream here) and event window live in its 256 MiB.
const streamWriters = 16
