package local_test

import (
	"os"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
)

// TestMain fails the package's tests if they leave a goroutine running.
// With sweepEnv set, the binary is TestSweep's child instead.
func TestMain(m *testing.M) {
	if dirs := os.Getenv(sweepEnv); dirs != "" {
		sweepOwner(dirs) // never returns
	}
	testutil.VerifyNoLeaks(m)
}
