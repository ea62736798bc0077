// Package fds keeps descriptors from crossing an exec by accident.
//
// Go's os/exec passes a child its standard descriptors and ExtraFiles,
// and every descriptor Go itself opens is close-on-exec; but a
// descriptor this process inherited without close-on-exec (a shell's
// `7</`, a caller's raw syscall.Open) crosses every exec it makes, into
// every command: the class of runc's CVE-2024-21626. Each of execbox's
// process starts (the CLI, the sandbox's init and agent, the rlimit
// shim) calls CloseExecFrom(3) first, as runc's CloseExecFrom does.
// Descriptors passed on purpose are dup2'ed into place by os/exec at the
// next exec, which clears the flag again on the copy.
package fds

import (
	"errors"
	"os"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// CloseExecFrom marks every descriptor >= min close-on-exec. It uses
// close_range(CLOSE_RANGE_CLOEXEC) (Linux 5.11), and walks /proc/self/fd
// where that is missing. It does not allocate on the close_range path.
func CloseExecFrom(min int) error {
	err := unix.CloseRange(uint(min), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		err = walk(min, func(fd int) error {
			_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
			return err
		})
	}
	if err == nil {
		sealedFrom.CompareAndSwap(0, int32(min))
	}
	return err
}

// sealedFrom is the min of the first CloseExecFrom that succeeded, or 0:
// from then on every descriptor >= it is close-on-exec, since all this
// process opens afterwards it opens through Go (execbox's processes call
// it first, and open nothing by raw system calls), and Leaky need not
// look (it reads /proc/self/fd: a tenth of a millisecond per command).
var sealedFrom atomic.Int32

// Leaky lists the descriptors >= min that are not close-on-exec: those
// an exec from this process would pass on.
func Leaky(min int) ([]int, error) {
	if s := sealedFrom.Load(); s != 0 && int(s) <= min {
		return nil, nil
	}
	var out []int
	err := walk(min, func(fd int) error {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err == nil && flags&unix.FD_CLOEXEC == 0 {
			out = append(out, fd)
		}
		return nil
	})
	return out, err
}

// walk calls fn for each open descriptor >= min, except the one it
// reads /proc/self/fd through.
func walk(min int, fn func(fd int) error) error {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd < min || fd == int(d.Fd()) {
			continue
		}
		if err := fn(fd); err != nil && !errors.Is(err, unix.EBADF) {
			return err
		}
	}
	return nil
}
