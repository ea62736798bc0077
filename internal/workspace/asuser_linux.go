package workspace

import (
	"fmt"
	"runtime"

	"github.com/execbox/execbox"
	"golang.org/x/sys/unix"
)

// DoAsUser runs fn under the file system identity of uid and gid, as
// AsUser does for each of its calls.
func DoAsUser(uid, gid int, fn func() error) error {
	runtime.LockOSThread()
	prevGID, _ := unix.SetfsgidRetGid(gid)
	prevUID, _ := unix.SetfsuidRetUid(uid)
	defer func() {
		unix.Setfsuid(prevUID)
		unix.Setfsgid(prevGID)
		// setfsuid reports nothing but the previous value: check that the
		// thread is itself again before handing it back, else let it die
		// with the goroutine.
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
