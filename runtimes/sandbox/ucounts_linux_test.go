package sandbox_test

import (
	"os/exec"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
	"golang.org/x/sys/unix"
)

// The kernel charges the per-user counts of everything inside a user
// namespace (inotify instances and watches, POSIX message queue bytes,
// queued signals) to the namespace's owner too. When every sandbox's
// user namespace was owned by host root (the red team's finding), one
// sandbox holding every inotify
// instance it can get takes all of root's (fs.inotify.max_user_instances,
// 128 by default): no root daemon of the host (systemd, udev, execbox
// itself) and no other sandbox can then create one.
func TestInotifyInstancesNotHostRoots(t *testing.T) {
	testutil.Require(t, testutil.Root) // host root's per-user counts
	testutil.Require(t, testutil.Command("python3"))
	rt := requireSandbox(t, sandbox.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	got := startHolder(t, sb, `
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
print(len(fds), flush=True)
time.sleep(60)
`, nil)
	t.Logf("the sandbox holds %s inotify instances", got)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Errorf("while a sandbox holds %s inotify instances, host root cannot create one: %v", got, err)
	} else {
		unix.Close(fd)
	}
}

// The same root cause for POSIX message queues: their bytes are charged
// to host root's RLIMIT_MSGQUEUE (819200 bytes by default) as well, so a
// sandbox that opens queues until it fails leaves host root (and every
// other sandbox) unable to open a single one (EMFILE).
func TestMqueueBytesNotHostRoots(t *testing.T) {
	testutil.Require(t, testutil.Root) // host root's per-user counts
	testutil.Require(t, testutil.Command("python3"))
	rt := requireSandbox(t, sandbox.Options{})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	got := startHolder(t, sb, `
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
class attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long), ("curmsgs", ctypes.c_long), ("pad", ctypes.c_long * 4)]
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(attr)]
n = 0
for i in range(1000):
    a = attr(0, 10, 8192, 0)
    name = b"/redteam%d" % i
    q = libc.mq_open(name, os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(a))
    if q < 0:
        break
    libc.mq_unlink(name)
    n += 1
print(n, flush=True)
time.sleep(60)
`, nil)
	t.Logf("the sandbox holds %s message queues of 80 KiB", got)
	// The host's side, in a child so that nothing is left open here.
	out, err := exec.Command("python3", "-c", `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long), ("curmsgs", ctypes.c_long), ("pad", ctypes.c_long * 4)]
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(attr)]
a = attr(0, 10, 8192, 0)
name = b"/redteam-host-%d" % os.getpid()
q = libc.mq_open(name, os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(a))
if q < 0:
    print(os.strerror(ctypes.get_errno()))
    sys.exit(1)
libc.mq_unlink(name)
`).CombinedOutput()
	if err != nil {
		t.Errorf("while a sandbox holds %s message queues, host root cannot open one: %v: %s", got, err, out)
	}
}
