//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary act as a confined helper: it installs the
// filter, then reports on stdout what each probe returned.
const helperEnv = "EXECBOX_SECCOMP_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helper())
	}
	os.Exit(m.Run())
}

// probes are the calls the helper makes after installing the filter, by
// name, each returning the errno it got (0 for success).
var probes = map[string]func() error{
	"mount":        func() error { return unix.Mount("none", "/tmp", "tmpfs", 0, "") },
	"umount":       func() error { return unix.Unmount("/proc", unix.MNT_DETACH) },
	"unshare-user": func() error { return unix.Unshare(unix.CLONE_NEWUSER) },
	"unshare-net":  func() error { return unix.Unshare(unix.CLONE_NEWNET) },
	"unshare-files": func() error {
		// On a thread of its own, never unlocked, so that it exits with
		// its goroutine: a file table private to the thread running the
		// other probes would get the netpoller's epoll descriptor (made
		// by the first network or file probe), which the runtime's other
		// threads then cannot find (EBADF, a fatal error).
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			errc <- unix.Unshare(unix.CLONE_FILES)
		}()
		return <-errc
	},
	"setns":  func() error { return unix.Setns(0, 0) },
	"ptrace": func() error { return unix.PtraceAttach(os.Getppid()) },
	"keyctl": func() error {
		_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
		return err
	},
	"bpf": func() error {
		_, _, e := unix.Syscall(unix.SYS_BPF, 0, 0, 0)
		return errnoErr(e)
	},
	"perf_event_open": func() error {
		_, _, e := unix.Syscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, 0, 0, 0, 0)
		return errnoErr(e)
	},
	"vsock": func() error {
		fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"tiocsti": func() error {
		return unix.IoctlSetPointerInt(0, unix.TIOCSTI, 'x')
	},
	"fork-exec": func() error { return exec.Command("true").Run() },
	"tcp": func() error {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			l.Close()
		}
		return err
	},
	"file": func() error {
		f, err := os.CreateTemp("", "seccomp")
		if err == nil {
			f.Close()
			os.Remove(f.Name())
		}
		return err
	},
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func helper() int {
	f, err := Build()
	if err != nil {
		fmt.Println("build:", err)
		return 2
	}
	if err := SetNoNewPrivs(); err != nil {
		fmt.Println(err)
		return 2
	}
	if err := Install(f, true); err != nil {
		fmt.Println(err)
		return 2
	}
	for name, probe := range probes {
		err := probe()
		var errno syscall.Errno
		switch {
		case err == nil:
			fmt.Printf("%s=ok\n", name)
		case errors.As(err, &errno):
			fmt.Printf("%s=%d\n", name, int(errno))
		default:
			fmt.Printf("%s=%v\n", name, err)
		}
	}
	return 0
}

func TestFilter(t *testing.T) {
	if !Supported() {
		t.Skip("no system call table for this architecture")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	got := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	eperm := fmt.Sprint(int(unix.EPERM))
	want := map[string]string{
		"mount": eperm, "umount": eperm, "unshare-user": eperm, "unshare-net": eperm,
		"setns": eperm, "ptrace": eperm, "keyctl": eperm, "bpf": eperm, "perf_event_open": eperm,
		"tiocsti": eperm, "vsock": fmt.Sprint(int(unix.EAFNOSUPPORT)),
		"unshare-files": "ok", "fork-exec": "ok", "tcp": "ok", "file": "ok",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s under the filter: %q, want %q", name, got[name], w)
		}
	}
}

func TestBuildJumpsInRange(t *testing.T) {
	if !Supported() {
		t.Skip("no system call table for this architecture")
	}
	f, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	for i, ins := range f {
		if ins.Code&0x07 == bpfJMP && i+1+int(ins.Jt) >= len(f) {
			t.Errorf("instruction %d jumps past the end", i)
		}
	}
	if last := f[len(f)-1]; last.Code != bpfRET|bpfK {
		t.Errorf("the program does not end with a return")
	}
}
