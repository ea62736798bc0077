//go:build linux

package dirfd

import (
	"io/fs"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// OpenNoFollow opens name in r, as r.OpenFile does, except that a symlink
// as its last component is refused (ELOOP), not followed: os.Root follows
// it, inside r, whatever the flag says. Use it to fchmod, fchown or
// futimens an entry of a tree that a user can change under the caller.
func OpenNoFollow(r *os.Root, name string, flag int) (*os.File, error) {
	dir, base := filepath.Split(filepath.Clean(name))
	if base == "." || base == ".." {
		return r.OpenFile(name, flag, 0)
	}
	if dir == "" {
		dir = "."
	}
	p, err := r.Open(dir)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	fd, err := unix.Openat(int(p.Fd()), base, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// SetMtime sets the modification time of the open file f (its access time
// is left alone), through the descriptor: futimens.
func SetMtime(f *os.File, mtime time.Time) error {
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime.UnixNano())}
	// utimensat(fd, NULL, ...) is futimens; x/sys has no form that passes
	// a NULL path.
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, f.Fd(), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return &fs.PathError{Op: "futimens", Path: f.Name(), Err: errno}
	}
	return nil
}
