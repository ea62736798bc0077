package code_test

import (
	"testing"

	"github.com/execbox/execbox/internal/testutil"
)

// TestMain fails the package's tests if they leave a goroutine running.
func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }
