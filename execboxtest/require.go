package execboxtest

import (
	"errors"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
)

// RequireAvailable skips t, saying why, unless rt reports itself
// available on this machine (Runtime.Health). Where a skip would hide a
// broken machine, the environment variable EXECBOX_TEST_REQUIRE turns it
// into a failure: "all", or a comma-separated list holding
// "runtime:NAME" (NAME is rt.Name(): "runtime:sandbox"). CI sets it, so
// that a suite cannot pass there by not running.
//
// Call it before Run instead of checking Health and calling t.Skip.
func RequireAvailable(t testing.TB, rt execbox.Runtime) {
	t.Helper()
	testutil.Require(t, testutil.NewDep("runtime:"+rt.Name(), func() error {
		if h := rt.Health(t.Context()); !h.Available {
			return errors.New(h.Detail)
		}
		return nil
	}))
}
