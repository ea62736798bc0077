package execboxtest_test

import (
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/execboxtest"
	"github.com/execbox/execbox/runtimes/local"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// The package documentation's examples, kept compiling: each is the
// TestConformance of a runtime's own tests.
func Example() {
	TestConformance := func(t *testing.T) {
		execboxtest.Run(t, execboxtest.Config{Runtime: local.New(local.Options{})})
	}
	_ = TestConformance
}

// An isolated runtime skips where it cannot work, allows for the time it
// takes to reach its boundary, and checks its own leftovers after Close.
func Example_isolated() {
	TestConformance := func(t *testing.T) {
		rt := sandbox.New(sandbox.Options{})
		execboxtest.RequireAvailable(t, rt)
		execboxtest.Run(t, execboxtest.Config{
			Runtime:    rt,
			Slack:      3 * time.Second,
			AfterClose: func(t *testing.T, sb execbox.Sandbox) { /* its cgroups, mounts and init are gone */ },
		})
	}
	_ = TestConformance
}
