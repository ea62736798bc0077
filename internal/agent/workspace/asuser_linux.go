package workspace

import (
	"fmt"
	"runtime"

	"github.com/execbox/execbox"
	"golang.org/x/sys/unix"
)

// fsCaps are the capabilities that decide file access. setfsuid drops
// them from the effective set when the file system uid leaves 0, but not
// under SECBIT_NO_SETUID_FIXUP (which the sandbox's agent runs with, to
// keep its capabilities across its own setuid): DoAsUser drops them
// itself, so that the user's identity is all that acts.
const fsCaps = 1<<unix.CAP_CHOWN | 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH |
	1<<unix.CAP_FOWNER | 1<<unix.CAP_FSETID | 1<<unix.CAP_LINUX_IMMUTABLE | 1<<unix.CAP_MKNOD

// DoAsUser runs fn under the file system identity of uid and gid, as
// AsUser does for each of its calls: the calling thread's file system
// uid and gid are the user's and it holds none of fsCaps, then both are
// restored. A thread that cannot be restored is not handed back to the
// runtime (it dies with the goroutine).
func DoAsUser(uid, gid int, fn func() error) error {
	runtime.LockOSThread()
	var saved [2]unix.CapUserData
	if err := unix.Capget(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &saved[0]); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("act as uid %d: capget: %w", uid, err)
	}
	dropped := saved
	dropped[0].Effective &^= fsCaps
	if dropped != saved {
		if err := unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &dropped[0]); err != nil {
			runtime.UnlockOSThread()
			return fmt.Errorf("act as uid %d: drop file capabilities: %w", uid, err)
		}
	}
	prevGID, _ := unix.SetfsgidRetGid(gid)
	prevUID, _ := unix.SetfsuidRetUid(uid)
	defer func() {
		unix.Setfsuid(prevUID)
		unix.Setfsgid(prevGID)
		// setfsuid reports nothing but the previous value: check that the
		// thread is itself again before handing it back, else let it die
		// with the goroutine.
		if dropped != saved && unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &saved[0]) != nil {
			return
		}
		if cur, _ := unix.SetfsuidRetUid(-1); cur == prevUID {
			if cur, _ := unix.SetfsgidRetGid(-1); cur == prevGID {
				runtime.UnlockOSThread()
			}
		}
	}()
	if cur, _ := unix.SetfsuidRetUid(-1); cur != uid {
		return fmt.Errorf("act as uid %d: %w", uid, execbox.ErrPermission)
	}
	return fn()
}
