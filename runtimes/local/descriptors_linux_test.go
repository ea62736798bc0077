package local_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
	"golang.org/x/sys/unix"
)

// TestInheritedDescriptorNotPassed: a descriptor the Go API's caller
// holds without close-on-exec (here the host's "/", at 100) must not
// reach a command, which could otherwise read and write through it
// whatever the caller can (the class of runc's CVE-2024-21626). Go's
// os/exec passes such a descriptor on: it only marks its own.
func TestInheritedDescriptorNotPassed(t *testing.T) {
	const fd = 100
	holdRoot(t, fd)
	sb, err := local.New(local.Options{Logger: testutil.Logger(t)}).Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: leakProbe(fd), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if out := res.Stdout.Text(); out != "" {
		t.Errorf("descriptor %d reached the command:\n%s", fd, out)
	}
}

// holdRoot opens the host's / without close-on-exec at fd, for the
// length of t.
func holdRoot(t *testing.T, fd int) {
	t.Helper()
	d, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(d)
	if err := unix.Dup3(d, fd, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
}

// leakProbe is a shell script that prints what it finds through fd.
func leakProbe(fd int) string {
	return "p=/proc/self/fd/" + strconv.Itoa(fd) + "; if [ -e $p ]; then echo leaked: $(readlink $p); ls $p/ | head -3; fi"
}
