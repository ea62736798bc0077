package testutil

import "testing"

// TestMain fails the package's tests if they leave a goroutine running.
func TestMain(m *testing.M) { VerifyNoLeaks(m) }
