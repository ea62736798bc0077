package local_test

import (
	"testing"

	"github.com/execbox/execbox/execboxtest"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

func TestConformance(t *testing.T) {
	execboxtest.Run(t, execboxtest.Config{
		Runtime: local.New(local.Options{Logger: testutil.Logger(t)}),
	})
}

// TestStreams: every byte, in the Result and the events, under load and
// behind a slow reader (execboxtest.RunStreams).
func TestStreams(t *testing.T) {
	execboxtest.RunStreams(t, execboxtest.Config{
		Runtime: local.New(local.Options{Logger: testutil.Logger(t)}),
	})
}
