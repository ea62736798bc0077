package execboxtest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/execboxtest"
)

// downRuntime is a runtime that reports itself unavailable.
type downRuntime struct{ execbox.Runtime }

func (downRuntime) Name() string { return "down" }
func (downRuntime) Health(context.Context) execbox.Health {
	return execbox.Health{Detail: "down by design"}
}

// TestRequireAvailable: an unavailable runtime skips the test, saying
// why, and fails it when EXECBOX_TEST_REQUIRE selects it (all, or
// runtime:NAME); this test runs itself in a child for the failing cases.
func TestRequireAvailable(t *testing.T) {
	if os.Getenv("EXECBOX_TEST_REQUIRE_CHILD") != "" {
		execboxtest.RequireAvailable(t, downRuntime{})
		return
	}
	t.Setenv("EXECBOX_TEST_REQUIRE", "")
	var skipped bool
	t.Run("skip", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		execboxtest.RequireAvailable(t, downRuntime{})
		t.Error("RequireAvailable did not stop the test")
	})
	if !skipped {
		t.Error("an unavailable runtime did not skip the test")
	}
	for _, env := range []string{"all", "command:sh,runtime:down", "runtime:other"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRequireAvailable$", "-test.v")
		cmd.Env = append(os.Environ(), "EXECBOX_TEST_REQUIRE_CHILD=1", "EXECBOX_TEST_REQUIRE="+env)
		out, err := cmd.CombinedOutput()
		wantFail := env != "runtime:other"
		if failed := err != nil; failed != wantFail || !strings.Contains(string(out), "down by design") {
			t.Errorf("EXECBOX_TEST_REQUIRE=%s: failed %v, want %v, saying why:\n%s", env, failed, wantFail, out)
		}
	}
}
