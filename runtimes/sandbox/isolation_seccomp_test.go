//go:build linux

package sandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
	"golang.org/x/sys/unix"
)

// atFDCWD is AT_FDCWD as the low 32 bits of a syscall argument.
const atFDCWD = uint64(uint32(0xffffff9c))

// seccompCall is a system call a command makes through ctypes, with the
// errno the sandbox's filter must give it.
type seccompCall struct {
	name string
	nr   uintptr
	args []uint64
	want syscall.Errno
}

// seccompCalls are calls a command has no business making. The arguments
// would make each one succeed or fail otherwise without the filter (never
// with the errno wanted), so that only the filter passes the test.
var seccompCalls = append([]seccompCall{
	// ENOSYS, so that libc falls back to openat. (clone3: see
	// clone3Call.)
	{"openat2", unix.SYS_OPENAT2, []uint64{atFDCWD, 0, 0, 0}, unix.ENOSYS},
	// CLONE_THREAD with CLONE_NEWUSER is EINVAL for the kernel: nothing
	// is created without the filter either.
	{"clone-newuser", unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER | unix.CLONE_THREAD, 0, 0, 0, 0}, unix.EPERM},
	{"clone-newns", unix.SYS_CLONE, []uint64{unix.CLONE_NEWNS | unix.CLONE_THREAD, 0, 0, 0, 0}, unix.EPERM},
	{"unshare-newpid", unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWPID}, unix.EPERM},
	// READ_IMPLIES_EXEC: all readable memory executable.
	{"personality", unix.SYS_PERSONALITY, []uint64{0x0400000}, unix.EPERM},
	{"fsopen", unix.SYS_FSOPEN, []uint64{0, 0}, unix.EPERM},
	{"open_tree", unix.SYS_OPEN_TREE, []uint64{atFDCWD, 0, 0}, unix.EPERM},
	{"move_mount", unix.SYS_MOVE_MOUNT, []uint64{0, 0, 0, 0, 0}, unix.EPERM},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR, []uint64{0, 0, 0, 0, 0}, unix.EPERM},
	{"umount2", unix.SYS_UMOUNT2, []uint64{0, 0}, unix.EPERM},
	{"pivot_root", unix.SYS_PIVOT_ROOT, []uint64{0, 0}, unix.EPERM},
	{"setns", unix.SYS_SETNS, []uint64{0, 0}, unix.EPERM},
	{"ptrace", unix.SYS_PTRACE, []uint64{unix.PTRACE_TRACEME}, unix.EPERM},
	{"bpf", unix.SYS_BPF, []uint64{0, 0, 0}, unix.EPERM},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, []uint64{0, 0, 0, 0, 0}, unix.EPERM},
	{"keyctl", unix.SYS_KEYCTL, []uint64{unix.KEYCTL_GET_KEYRING_ID, 0xfffffffd, 0}, unix.EPERM},
	{"io_uring_setup", unix.SYS_IO_URING_SETUP, []uint64{1, 0}, unix.EPERM},
	{"userfaultfd", unix.SYS_USERFAULTFD, []uint64{0}, unix.EPERM},
	{"kexec_load", unix.SYS_KEXEC_LOAD, []uint64{0, 0, 0, 0}, unix.EPERM},
	{"finit_module", unix.SYS_FINIT_MODULE, []uint64{0xffff, 0, 0}, unix.EPERM},
	{"socket-vsock", unix.SYS_SOCKET, []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, unix.EAFNOSUPPORT},
}, archSeccompCalls...)

// clone3Call is clone3 with a size of 0, EINVAL for the kernel: ENOSYS
// when the filter refuses it, so that libc falls back to clone, whose
// flags the filter checks. On cgroup v2 the agent starts each command
// with clone3 (CLONE_INTO_CGROUP) and commands inherit its filter, so
// there clone3 reaches the kernel.
func clone3Call(sb execbox.Sandbox) seccompCall {
	c := seccompCall{"clone3", unix.SYS_CLONE3, []uint64{0, 0}, unix.ENOSYS}
	for _, d := range sandbox.Leftovers(sb.(*sandbox.Sandbox)) {
		if _, err := os.Stat(filepath.Join(d, "cgroup.controllers")); err == nil {
			c.want = unix.EINVAL
		}
	}
	return c
}

// seccompScript is a Python program that makes each call and prints
// "name errno" (0 for success).
func seccompScript(calls []seccompCall) string {
	var b strings.Builder
	b.WriteString("import ctypes\nl = ctypes.CDLL(None, use_errno=True)\nl.syscall.restype = ctypes.c_long\n")
	b.WriteString("def call(name, nr, *args):\n ctypes.set_errno(0)\n r = l.syscall(ctypes.c_long(nr), *[ctypes.c_ulong(a) for a in args])\n print(name, ctypes.get_errno() if r == -1 else 0, flush=True)\n")
	for _, c := range calls {
		fmt.Fprintf(&b, "call(%q, %d", c.name, c.nr)
		for _, a := range c.args {
			fmt.Fprintf(&b, ", %d", a)
		}
		b.WriteString(")\n")
	}
	return b.String()
}

// TestIsolationSeccomp makes, from inside a sandbox, the system calls the
// filter refuses, tries to leave a setuid or setgid file in a root-owned
// given workspace, and checks that ordinary programs still work.
func TestIsolationSeccomp(t *testing.T) {
	rt := requireSandbox(t, sandbox.Options{})
	// A given workspace owned by root on the host, as `execbox exec` run
	// by root in a directory of its own hands over.
	ws, err := os.MkdirTemp("", "execbox-seccomp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := rt.Create(t.Context(), execbox.Spec{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	run := func(t *testing.T, req execbox.ExecRequest) execbox.Result {
		t.Helper()
		if req.Timeout == 0 {
			req.Timeout = testutil.Scale(60 * time.Second)
		}
		res, err := sb.Exec(t.Context(), req)
		if err != nil {
			t.Fatalf("Exec: %v", err)
		}
		return res
	}
	users := []struct {
		name string
		user *execbox.User
	}{{"default-user", nil}, {"root-inside", insideRoot(rt)}}

	t.Run("refused-calls", func(t *testing.T) {
		testutil.Require(t, testutil.Command("python3"))
		calls := append(seccompCalls[:len(seccompCalls):len(seccompCalls)], clone3Call(sb))
		for _, u := range users {
			res := run(t, execbox.ExecRequest{Command: []string{"python3", "-c", seccompScript(calls)}, User: u.user})
			got := map[string]string{}
			for line := range strings.SplitSeq(strings.TrimSpace(res.Stdout.Text()), "\n") {
				k, v, _ := strings.Cut(line, " ")
				got[k] = v
			}
			for _, c := range calls {
				if want := fmt.Sprint(int(c.want)); got[c.name] != want {
					t.Errorf("%s: %s returned errno %q, want %s (%v); stderr %q", u.name, c.name, got[c.name], want, c.want, res.Stderr.Text())
				}
			}
		}
	})

	t.Run("setuid-workspace", func(t *testing.T) {
		// Every way a shell, coreutils and Python have to make a set-id
		// file, as the command user and as root inside (root on the host
		// for a root-owned given workspace).
		script := `cd "$1"
cp /bin/true suid-chmod; chmod 4755 suid-chmod
cp /bin/true sgid-chmod; chmod g+s sgid-chmod
install -m 6755 /bin/true suid-install
python3 -c 'import os; os.close(os.open("suid-open", os.O_CREAT|os.O_WRONLY, 0o4755))'
python3 -c 'import os; f = os.open("suid-fchmod", os.O_CREAT|os.O_WRONLY, 0o755); os.fchmod(f, 0o4755)'
python3 -c 'import os; os.mknod("suid-mknod", 0o104755)'
mkdir -m 2755 sgid-dir
true`
		for _, u := range users {
			dir := u.name
			if err := os.Mkdir(filepath.Join(ws, dir), 0o777); err != nil {
				t.Fatal(err)
			}
			os.Chmod(filepath.Join(ws, dir), 0o777)
			res := run(t, execbox.ExecRequest{Command: []string{"sh", "-c", script, "sh", sb.Workspace() + "/" + dir}, User: u.user})
			entries, err := os.ReadDir(filepath.Join(ws, dir))
			if err != nil {
				t.Fatal(err)
			}
			if u.user == nil && len(entries) == 0 {
				// The command user is the one the given workspace's
				// owner is mapped to: its files are root's on the host.
				t.Errorf("%s: the script made no file at all", u.name)
			}
			for _, e := range entries {
				fi, err := os.Lstat(filepath.Join(ws, dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				st := fi.Sys().(*syscall.Stat_t)
				if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
					t.Errorf("%s: %s is %v, owner %d:%d on the host; stderr:\n%s", u.name, e.Name(), fi.Mode(), st.Uid, st.Gid, res.Stderr.Text())
				}
			}
		}
	})

	t.Run("ordinary-programs", func(t *testing.T) {
		programs := []struct {
			name, shell, want string
			deps              []testutil.Dep
		}{
			{"python", `python3 -c 'import subprocess, threading, os; t = threading.Thread(target=print, args=("thread",)); t.start(); t.join(); print(subprocess.run(["echo", "sub"], capture_output=True, text=True).stdout.strip())'`, "thread\nsub", []testutil.Dep{testutil.Command("python3")}},
			{"node", `node -e 'const {execFileSync} = require("child_process"); require("fs").writeFileSync("n.txt", "x"); console.log(execFileSync("echo", ["node"]).toString().trim())'`, "node", []testutil.Dep{testutil.Command("node")}},
			{"gcc", `printf '#include <stdio.h>\n#include <pthread.h>\nstatic void *f(void *a) { puts("c"); return a; }\nint main(void) { pthread_t t; pthread_create(&t, 0, f, 0); return pthread_join(t, 0); }\n' > t.c && gcc -pthread -o t t.c && ./t`, "c", []testutil.Dep{testutil.Command("gcc")}},
			{"go", `mkdir -p gobuild && cd gobuild && printf 'package main\nimport "os"\nfunc main() { os.Stdout.WriteString("go\\n") }\n' > main.go && HOME=$PWD GOCACHE=$PWD/.cache go build -o m main.go && ./m`, "go", []testutil.Dep{testutil.Command("go")}},
			{"git", `rm -rf repo && git init -q repo && cd repo && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x && git log --format=%s`, "x", []testutil.Dep{testutil.Command("git")}},
		}
		for _, p := range programs {
			t.Run(p.name, func(t *testing.T) {
				testutil.Require(t, p.deps...)
				res := run(t, execbox.ExecRequest{Shell: `cd "$(mktemp -d)" && ` + p.shell, Env: map[string]string{"PATH": os.Getenv("PATH")}, Timeout: testutil.Scale(120 * time.Second)})
				if got := strings.TrimSpace(res.Stdout.Text()); !res.Success() || got != p.want {
					t.Errorf("exit %d, stdout %q, want %q; stderr %s", res.ExitCode, got, p.want, res.Stderr.Text())
				}
			})
		}
	})
}
