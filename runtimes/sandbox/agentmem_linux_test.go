//go:build !race

package sandbox_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// Not under the race detector: the agent is this test binary re-executed,
// and instrumented it needs several times the memory its cgroup allows.
// The VM matrix (make test-vm) runs it on every host kind.

// TestAgentSurvivesBinaryOutput: three commands at once, each printing
// NUL bytes past the default output limit on both streams, get their
// results; the agent, in its own memory-limited cgroup, is not killed. A
// red-team pass OOM-killed it with one such command when NULs went as JSON
// string escapes (six bytes each), and with two or three while it held
// each result several times to encode it: results now go as raw parts,
// written from the capture buffer itself.
func TestAgentSurvivesBinaryOutput(t *testing.T) {
	rt := requireSandbox(t, sandbox.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer checkGone(t, sb)
	defer sb.Close()
	errs := make(chan error, 1)
	for range 3 {
		go func() {
			res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "head -c 32M /dev/zero; head -c 32M /dev/zero >&2", Timeout: time.Minute})
			if err == nil && (res.Stdout.Total != 32<<20 || res.Stderr.Total != 32<<20) {
				err = fmt.Errorf("totals %d and %d, want 32 MiB each: %s", res.Stdout.Total, res.Stderr.Total, res.String())
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "echo alive"}); err != nil || res.Stdout.Text() != "alive\n" {
		t.Errorf("the sandbox afterwards: %v, %s", err, res.String())
	}
}
