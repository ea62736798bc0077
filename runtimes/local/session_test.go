package local_test

import (
	"testing"

	"github.com/execbox/execbox/execboxtest"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

func TestSessions(t *testing.T) {
	execboxtest.RunSessions(t, execboxtest.Config{
		Runtime: local.New(local.Options{Logger: testutil.Logger(t)}),
	})
}
