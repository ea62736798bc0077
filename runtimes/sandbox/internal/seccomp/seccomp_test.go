//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary act as a confined helper: it installs the
// filter, then reports on stdout what each probe returned.
const helperEnv = "EXECBOX_SECCOMP_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helper())
	}
	if mode := os.Getenv(benchEnv); mode != "" {
		benchHelper(mode)
		os.Exit(0)
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
	"clone-newuser": func() error {
		// CLONE_THREAD with CLONE_NEWUSER is EINVAL for the kernel, so
		// that without the filter no process is ever made.
		_, _, e := unix.RawSyscall(unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_THREAD, 0, 0)
		return errnoErr(e)
	},
	"clone3": func() error {
		_, _, e := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
		return errnoErr(e)
	},
	"openat2": func() error {
		how := unix.OpenHow{Flags: unix.O_RDONLY}
		fd, err := unix.Openat2(unix.AT_FDCWD, "/", &how)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"personality-query": func() error {
		_, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
		return errnoErr(e)
	},
	"personality-exec": func() error {
		// READ_IMPLIES_EXEC: every readable mapping executable.
		_, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, 0x0400000, 0, 0)
		return errnoErr(e)
	},
	"fsopen": func() error {
		fd, err := unix.Fsopen("tmpfs", 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"io_uring": func() error {
		_, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, 0, 0)
		return errnoErr(e)
	},
	"userfaultfd": func() error {
		_, _, e := unix.Syscall(unix.SYS_USERFAULTFD, 0, 0, 0)
		return errnoErr(e)
	},
	"chmod-suid": func() error { return inTemp(func(f string) error { return unix.Chmod(f, 0o4755) }) },
	"chmod-sgid": func() error {
		return inTemp(func(f string) error { return unix.Fchmodat(unix.AT_FDCWD, f, 0o2755, 0) })
	},
	"chmod-plain": func() error { return inTemp(func(f string) error { return unix.Chmod(f, 0o1755) }) },
	"fchmod-suid": func() error {
		return inTemp(func(f string) error {
			fd, err := os.Open(f)
			if err != nil {
				return err
			}
			defer fd.Close()
			return fd.Chmod(0o755 | os.ModeSetuid)
		})
	},
	"openat-suid": func() error {
		return inTempDir(func(d string) error { return create(d+"/f", unix.O_CREAT|unix.O_WRONLY, 0o4755) })
	},
	"openat-plain": func() error {
		return inTempDir(func(d string) error { return create(d+"/f", unix.O_CREAT|unix.O_WRONLY, 0o755) })
	},
	"openat-no-create": func() error {
		// Without O_CREAT the mode is ignored, whatever it holds.
		return inTemp(func(f string) error { return create(f, unix.O_RDONLY, 0o6777) })
	},
	"mknod-suid": func() error {
		return inTempDir(func(d string) error { return unix.Mknod(d+"/f", unix.S_IFREG|0o4755, 0) })
	},
	"mkdir-sgid": func() error {
		// Allowed: mkdir keeps only the permission and sticky bits.
		return inTempDir(func(d string) error {
			if err := unix.Mkdir(d+"/d", 0o2755); err != nil {
				return err
			}
			var st unix.Stat_t
			if err := unix.Stat(d+"/d", &st); err != nil {
				return err
			}
			if st.Mode&unix.S_ISGID != 0 {
				return errors.New("mkdir made a setgid directory")
			}
			return nil
		})
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

// inTempDir calls f with a new directory, removed afterwards.
func inTempDir(f func(dir string) error) error {
	d, err := os.MkdirTemp("", "seccomp")
	if err != nil {
		return err
	}
	defer os.RemoveAll(d)
	return f(d)
}

// inTemp calls f with a new empty file, removed afterwards.
func inTemp(f func(file string) error) error {
	return inTempDir(func(d string) error {
		if err := os.WriteFile(d+"/f", nil, 0o644); err != nil {
			return err
		}
		return f(d + "/f")
	})
}

// create calls openat(2), with mode whatever the flags.
func create(path string, flags, mode int) error {
	fd, err := unix.Openat(unix.AT_FDCWD, path, flags, uint32(mode))
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// The results of probes: an errno in decimal, or "ok".
var (
	eperm  = fmt.Sprint(int(unix.EPERM))
	enosys = fmt.Sprint(int(unix.ENOSYS))
)

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func helper() int {
	f, err := Build(Options{})
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
	maps.Copy(probes, legacyProbes)
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

// table is the dependency on a system call table for this architecture.
var table = testutil.NewDep("seccomp", func() error {
	if !Supported() {
		return fmt.Errorf("no system call table for %s", runtime.GOARCH)
	}
	return nil
})

func TestFilter(t *testing.T) {
	testutil.Require(t, table)
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
	want := map[string]string{
		"clone-newuser": eperm, "clone3": enosys, "openat2": enosys,
		"personality-query": "ok", "personality-exec": eperm,
		"fsopen": eperm, "io_uring": eperm, "userfaultfd": eperm,
		"chmod-suid": eperm, "chmod-sgid": eperm, "fchmod-suid": eperm, "chmod-plain": "ok",
		"openat-suid": eperm, "openat-plain": "ok", "openat-no-create": "ok",
		"mknod-suid": eperm, "mkdir-sgid": "ok",
		"mount": eperm, "umount": eperm, "unshare-user": eperm, "unshare-net": eperm,
		"setns": eperm, "ptrace": eperm, "keyctl": eperm, "bpf": eperm, "perf_event_open": eperm,
		"tiocsti": eperm, "vsock": fmt.Sprint(int(unix.EAFNOSUPPORT)),
		"unshare-files": "ok", "fork-exec": "ok", "tcp": "ok", "file": "ok",
	}
	maps.Copy(want, legacyWant)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s under the filter: %q, want %q", name, got[name], w)
		}
	}
}

func TestBuildJumpsInRange(t *testing.T) {
	testutil.Require(t, table)
	f, err := Build(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, ins := range f {
		if ins.Code&0x07 != bpfJMP {
			continue
		}
		far := max(int(ins.Jt), int(ins.Jf))
		if ins.Code == bpfJMP|bpfJA {
			far = int(ins.K)
		}
		if i+1+far >= len(f) {
			t.Errorf("instruction %d jumps past the end", i)
		}
	}
	if last := f[len(f)-1]; last.Code != bpfRET|bpfK {
		t.Errorf("the program does not end with a return")
	}
}

// TestFilterBytes: a filter survives Bytes and ParseFilter whole, and
// ParseFilter refuses what is no filter.
func TestFilterBytes(t *testing.T) {
	testutil.Require(t, table)
	f, err := Build(Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := f.Bytes()
	if len(b) != 8*len(f) {
		t.Fatalf("%d instructions, %d bytes", len(f), len(b))
	}
	g, err := ParseFilter(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f, g) {
		t.Error("ParseFilter(f.Bytes()) differs from f")
	}
	for _, bad := range [][]byte{nil, b[:len(b)-1], make([]byte, 8*(unix.BPF_MAXINSNS+1))} {
		if _, err := ParseFilter(bad); err == nil {
			t.Errorf("ParseFilter of %d bytes: no error", len(bad))
		}
	}
}
