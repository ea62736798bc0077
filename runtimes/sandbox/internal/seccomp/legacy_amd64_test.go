//go:build linux

package seccomp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// legacyProbes make the set-id checks on the path calls that amd64 has
// and arm64 lacks (golang.org/x/sys uses the *at forms): their modes are
// in other arguments.
var legacyProbes = map[string]func() error{
	"open-suid": func() error {
		return inTempDir(func(d string) error { return rawFD(unix.SYS_OPEN, d+"/f", unix.O_CREAT|unix.O_WRONLY, 0o4755) })
	},
	"open-tmpfile-sgid": func() error {
		return inTempDir(func(d string) error { return rawFD(unix.SYS_OPEN, d, unix.O_TMPFILE|unix.O_WRONLY, 0o2755) })
	},
	"open-plain": func() error {
		return inTempDir(func(d string) error { return rawFD(unix.SYS_OPEN, d+"/f", unix.O_CREAT|unix.O_WRONLY, 0o755) })
	},
	"creat-suid": func() error {
		return inTempDir(func(d string) error { return rawFD(unix.SYS_CREAT, d+"/f", 0o4755, 0) })
	},
	"chmod-legacy-suid": func() error {
		return inTemp(func(f string) error { return rawFD(unix.SYS_CHMOD, f, 0o4755, 0) })
	},
	"mknod-legacy-sgid": func() error {
		return inTempDir(func(d string) error { return rawFD(unix.SYS_MKNOD, d+"/f", unix.S_IFREG|0o2755, 0) })
	},
}

var legacyWant = map[string]string{
	"open-suid": eperm, "open-tmpfile-sgid": eperm, "open-plain": "ok",
	"creat-suid": eperm, "chmod-legacy-suid": eperm, "mknod-legacy-sgid": eperm,
}

// rawFD calls the path system call nr(path, a1, a2) and closes what it
// returns when it is a descriptor.
func rawFD(nr uintptr, path string, a1, a2 int) error {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	r, _, e := unix.Syscall(nr, uintptr(unsafe.Pointer(p)), uintptr(a1), uintptr(a2))
	if e != 0 {
		return e
	}
	if nr != unix.SYS_CHMOD && nr != unix.SYS_MKNOD {
		unix.Close(int(r))
	}
	return nil
}
