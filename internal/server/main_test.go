package server_test

import (
	"os"
	"sync"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
)

// TestMain fails the package's tests if they leave a goroutine running,
// and removes the static agent the image tests share.
func TestMain(m *testing.M) {
	code := testutil.LeakCheck(m.Run())
	if staticDir != "" {
		os.RemoveAll(staticDir)
	}
	os.Exit(code)
}

// staticDir holds the static execbox of the tests that make sandboxes
// from images; it outlives them all (testutil.StaticExecbox builds once
// per test binary) and TestMain removes it.
var (
	staticOnce sync.Once
	staticDir  string
)

// staticAgent returns the static execbox for sandboxes made from images.
func staticAgent(t testing.TB) string {
	t.Helper()
	staticOnce.Do(func() {
		dir, err := os.MkdirTemp("", "execbox-server-test-")
		if err == nil {
			err = os.Chmod(dir, 0o755) // the sandbox's init runs the agent as another uid
		}
		if err != nil {
			t.Fatal(err)
		}
		staticDir = dir
	})
	bin, err := testutil.StaticExecbox(staticDir)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
