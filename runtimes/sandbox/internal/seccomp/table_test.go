//go:build linux

package seccomp

import (
	"encoding/binary"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
	"golang.org/x/sys/unix"
)

// arches are the architectures Build has a table for.
var arches = []struct {
	goarch string
	audit  uint32
	x32    bool
}{
	{"amd64", unix.AUDIT_ARCH_X86_64, true},
	{"arm64", unix.AUDIT_ARCH_AARCH64, false},
}

// kernelTable reads the system call numbers of goarch from the
// golang.org/x/sys this module builds with (unix/zsysnum_linux_*.go, made
// from the kernel's own tables), by name.
func kernelTable(t *testing.T, goarch string) map[string]uint32 {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Fatalf("go list golang.org/x/sys: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "unix", "zsysnum_linux_"+goarch+".go"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint32{}
	for _, f := range regexp.MustCompile(`(?m)^\s*SYS_([A-Z0-9_]+)\s*=\s*(\d+)`).FindAllStringSubmatch(string(b), -1) {
		nr, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		m[strings.ToLower(f[1])] = uint32(nr)
	}
	if len(m) < 250 {
		t.Fatalf("only %d system calls for %s", len(m), goarch)
	}
	return m
}

// TestPolicyCoversTable fails when the kernel's table for an architecture
// has a call the policy neither allows nor denies by name: each new
// system call must be judged, not left to the ENOSYS default by accident.
func TestPolicyCoversTable(t *testing.T) {
	for _, a := range arches {
		for name, nr := range kernelTable(t, a.goarch) {
			if policy()[name] == actInvalid {
				t.Errorf("%s: %s (%d) is in no list of policy.go", a.goarch, name, nr)
			}
		}
	}
}

// TestTableIsCurrent fails when zsysnum_linux_GOARCH.go differs from
// golang.org/x/sys: run go generate after upgrading it.
func TestTableIsCurrent(t *testing.T) {
	testutil.Require(t, table)
	want := kernelTable(t, runtime.GOARCH)
	if !maps.Equal(sysnums(), want) {
		t.Errorf("sysnums has %d calls, golang.org/x/sys %d: run go generate ./internal/seccomp", len(sysnums()), len(want))
	}
}

// TestBuildFollowsPolicy runs the program of each architecture, in a
// small interpreter, on every number of its table, nearby numbers, and
// the arguments each check looks at.
func TestBuildFollowsPolicy(t *testing.T) {
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	eperm, enosys := errnoRet(unix.EPERM), errnoRet(unix.ENOSYS)
	for _, a := range arches {
		nums := kernelTable(t, a.goarch)
		f, err := build(nums, a.audit, a.x32, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d instructions", a.goarch, len(f))
		// With Options.Clone3 (the agent on cgroup v2), clone3 alone
		// changes: allowed.
		f3, err := build(nums, a.audit, a.x32, Options{Clone3: true})
		if err != nil {
			t.Fatal(err)
		}
		for name, nr := range nums {
			want, _ := runBPF(t, f, a.audit, nr)
			if name == "clone3" {
				want = allow
			}
			if got, _ := runBPF(t, f3, a.audit, nr); got != want {
				t.Errorf("%s with Clone3: %s (%d) returns %#x, want %#x", a.goarch, name, nr, got, want)
			}
		}
		known := map[uint32]string{}
		for name, nr := range nums {
			known[nr] = name
		}
		longest := 0
		run := func(nr uint32, args ...uint64) uint32 {
			r, steps := runBPF(t, f, a.audit, nr, args...)
			longest = max(longest, steps)
			return r
		}
		for name, nr := range nums {
			var want uint32
			switch policy()[name] {
			case actAllow:
				want = allow
			case actEPERM:
				want = eperm
			case actENOSYS:
				want = enosys
			default:
				continue // checked below
			}
			if got := run(nr); got != want {
				t.Errorf("%s: %s (%d) returns %#x, want %#x", a.goarch, name, nr, got, want)
			}
		}
		for _, nr := range []uint32{1000, 0x3fffffff, 0x40000000, 0xffffffff} {
			if _, ok := known[nr]; !ok && run(nr) != enosys {
				t.Errorf("%s: unknown number %#x returns %#x, want ENOSYS", a.goarch, nr, run(nr))
			}
		}
		if got, _ := runBPF(t, f, unix.AUDIT_ARCH_I386, nums["getpid"]); got != enosys {
			t.Errorf("%s: another architecture's call returns %#x, want ENOSYS", a.goarch, got)
		}
		checks := []struct {
			name string
			args []uint64
			want uint32
		}{
			{"clone", []uint64{uint64(unix.SIGCHLD)}, allow},
			{"clone", []uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND}, allow},
			{"clone", []uint64{unix.CLONE_NEWUSER}, eperm},
			{"clone", []uint64{unix.CLONE_NEWTIME | uint64(unix.SIGCHLD)}, eperm},
			{"unshare", []uint64{unix.CLONE_FILES}, allow},
			{"unshare", []uint64{unix.CLONE_NEWNS}, eperm},
			{"personality", []uint64{0}, allow},
			{"personality", []uint64{0xffffffff}, allow},
			{"personality", []uint64{0x20008}, allow},
			{"personality", []uint64{0x0400000}, eperm},
			{"socket", []uint64{unix.AF_INET}, allow},
			{"socket", []uint64{unix.AF_VSOCK}, errnoRet(unix.EAFNOSUPPORT)},
			{"ioctl", []uint64{0, unix.TCGETS}, allow},
			{"ioctl", []uint64{0, unix.TIOCSTI}, eperm},
			{"ioctl", []uint64{0, unix.TIOCLINUX}, eperm},
			{"fchmod", []uint64{3, 0o755}, allow},
			{"fchmod", []uint64{3, 0o4755}, eperm},
			{"fchmodat", []uint64{3, 0, 0o2700}, eperm},
			{"fchmodat", []uint64{3, 0, 0o1777}, allow},
			{"fchmodat2", []uint64{3, 0, 0o6000}, eperm},
			{"mknodat", []uint64{3, 0, unix.S_IFREG | 0o4755}, eperm},
			{"openat", []uint64{3, 0, unix.O_RDONLY, 0o4755}, allow},
			{"openat", []uint64{3, 0, unix.O_DIRECTORY, 0o4755}, allow},
			{"openat", []uint64{3, 0, unix.O_CREAT, 0o644}, allow},
			{"openat", []uint64{3, 0, unix.O_CREAT, 0o4755}, eperm},
			{"openat", []uint64{3, 0, unix.O_TMPFILE, 0o2755}, eperm},
			{"mkdirat", []uint64{3, 0, 0o2755}, allow},
			{"clone3", nil, enosys},
			{"openat2", nil, enosys},
		}
		if a.goarch == "amd64" {
			checks = append(checks, []struct {
				name string
				args []uint64
				want uint32
			}{
				{"open", []uint64{0, unix.O_CREAT, 0o4755}, eperm},
				{"open", []uint64{0, unix.O_RDWR, 0o4755}, allow},
				{"creat", []uint64{0, 0o4755}, eperm},
				{"chmod", []uint64{0, 0o2755}, eperm},
				{"mknod", []uint64{0, unix.S_IFREG | 0o4755}, eperm},
				{"modify_ldt", nil, eperm},
			}...)
		}
		for _, c := range checks {
			nr, ok := nums[c.name]
			if !ok {
				t.Fatalf("%s: no %s", a.goarch, c.name)
			}
			if got := run(nr, c.args...); got != c.want {
				t.Errorf("%s: %s%#o returns %#x, want %#x", a.goarch, c.name, c.args, got, c.want)
			}
		}
		// The tree keeps every call cheap: the deny-list it replaced ran
		// 63 instructions for each allowed call on amd64.
		t.Logf("%s: at most %d instructions run for a call", a.goarch, longest)
		if longest > 24 {
			t.Errorf("%s: a call runs %d instructions, want at most 24", a.goarch, longest)
		}
	}
}

// runBPF interprets the instructions Build emits on a seccomp_data of
// arch, nr and args, and returns what the program returns and how many
// instructions it ran.
func runBPF(t *testing.T, f Filter, arch, nr uint32, args ...uint64) (uint32, int) {
	t.Helper()
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[offNr:], nr)
	binary.LittleEndian.PutUint32(data[offArch:], arch)
	for i, v := range args {
		binary.LittleEndian.PutUint64(data[16+8*i:], v)
	}
	var acc uint32
	for pc, steps := 0, 0; steps < len(f); pc, steps = pc+1, steps+1 {
		if pc >= len(f) {
			t.Fatalf("program runs past its end")
		}
		ins := f[pc]
		switch ins.Code {
		case bpfLD | bpfW | bpfABS:
			acc = binary.LittleEndian.Uint32(data[ins.K:])
		case bpfRET | bpfK:
			return ins.K, steps + 1
		case bpfJMP | bpfJA:
			pc += int(ins.K)
		case bpfJMP | bpfJEQ | bpfK, bpfJMP | bpfJGE | bpfK, bpfJMP | bpfJSET | bpfK:
			var cond bool
			switch ins.Code &^ (bpfJMP | bpfK) {
			case bpfJEQ:
				cond = acc == ins.K
			case bpfJGE:
				cond = acc >= ins.K
			case bpfJSET:
				cond = acc&ins.K != 0
			}
			if cond {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		default:
			t.Fatalf("instruction %d: unknown code %#x", pc, ins.Code)
		}
	}
	t.Fatalf("program does not return")
	return 0, 0
}
