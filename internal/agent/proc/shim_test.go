package proc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"golang.org/x/sys/unix"
)

// TestShimStartErrors: a command that goes through the shim (here for
// a CPU limit) reports a program it cannot exec as Start's error, of the
// same kind as a direct exec, not as a run that exited 126.
func TestShimStartErrors(t *testing.T) {
	noExec := t.TempDir() + "/not-executable"
	if err := unix.Mknod(noExec, unix.S_IFREG|0o644, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		kind error
	}{{"/nonexistent", execbox.ErrNotFound}, {noExec, execbox.ErrPermission}} {
		_, err := Start(Options{Path: tc.path, Args: []string{"x"}, Dir: t.TempDir(), Limits: execbox.Limits{CPUTime: 10 * time.Second},
			Timeout: time.Second, GracePeriod: time.Second, OutputLimit: 1, Marker: "shim-test/p"})
		if !errors.Is(err, tc.kind) {
			t.Errorf("Start(%s) through the shim: err %v, want %v", tc.path, err, tc.kind)
		}
	}
}

// TestShimKeepsTerminal: the shim's close-on-exec sweep spares what
// Start passes on purpose: the controlling terminal at fd 3.
func TestShimKeepsTerminal(t *testing.T) {
	opts := sh(`test -t 3 && echo fd3`)
	opts.Terminal = &Terminal{}
	opts.Limits = execbox.Limits{CPUTime: 10 * time.Second}
	res, err := start(t, opts).Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Stdout.Text(); !strings.Contains(got, "fd3") {
		t.Errorf("through the shim, fd 3 is not the terminal: stdout %q, %s", got, res.String())
	}
}
