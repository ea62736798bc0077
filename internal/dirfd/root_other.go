//go:build !linux

package dirfd

import (
	"errors"
	"os"
	"time"
)

// OpenNoFollow is r.OpenFile here: only Linux gets the O_NOFOLLOW form,
// so a final symlink is followed, though never out of r.
func OpenNoFollow(r *os.Root, name string, flag int) (*os.File, error) {
	return r.OpenFile(name, flag, 0)
}

// SetMtime is errors.ErrUnsupported here; callers fall back to a change
// by path.
func SetMtime(f *os.File, mtime time.Time) error {
	return errors.ErrUnsupported
}
