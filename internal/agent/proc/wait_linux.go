package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// waitExited returns a channel closed when pid has exited, without reaping
// it: the zombie keeps the PID and process group reserved while execbox
// kills the rest of the tree, so a reused PID is never signalled.
//
// It polls a pidfd through Go's netpoller, so a running process costs no
// OS thread; kernels without pidfd (before 5.3) fall back to a blocking
// waitid in a goroutine.
func waitExited(pid int) <-chan struct{} {
	done := make(chan struct{})
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		go func() {
			var info unix.Siginfo
			for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
			}
			close(done)
		}()
		return done
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	go func() {
		defer close(done)
		defer f.Close()
		rc, err := f.SyscallConn()
		if err != nil {
			return
		}
		// Read waits for the pidfd to become readable (the process exited)
		// whenever the callback returns false.
		_ = rc.Read(func(fd uintptr) bool {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
			return err != nil && err != unix.EINTR || info.Signo != 0
		})
	}()
	return done
}
