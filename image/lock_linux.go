//go:build linux

package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errLocked: a lock is held by someone else.
var errLocked = errors.New("locked")

// tryLock takes an exclusive flock on the file name (created if
// missing) without waiting: errLocked if someone holds it.
func tryLock(name string) (unlock func(), err error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, errLocked
		}
		return nil, &os.PathError{Op: "flock", Path: name, Err: err}
	}
	return func() { f.Close() }, nil
}

// lockCtx takes an exclusive flock on name, waiting for it until ctx
// ends (polling: a blocking flock cannot be cancelled).
func lockCtx(ctx context.Context, name string) (unlock func(), err error) {
	wait := time.Millisecond
	for {
		unlock, err := tryLock(name)
		if !errors.Is(err, errLocked) {
			return unlock, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// Use marks the root of img in use until release is called: Remove and
// Prune, in any process, leave it alone. It holds a shared flock on the
// lock file beside the root (so a process that dies releases it), and
// records the time as the image's LastUsed. Call it for each sandbox
// created from img, release when it is closed; release is idempotent.
// If img was removed since it was got, Use returns an error matching
// execbox.ErrNotFound: Ensure it again.
func (s *Store) Use(img *Image) (release func(), err error) {
	chain := img.ChainID[min(len(img.ChainID), len("sha256:")):]
	if !isHex(chain) {
		return nil, fmt.Errorf("image %s: bad chain ID %q", img.Ref, img.ChainID)
	}
	lock := filepath.Join(s.rootDir(chain), "lock")
	f, err := os.OpenFile(lock, os.O_RDWR|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFound(img.Ref, "removed from the store")
	}
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "flock", Path: lock, Err: err}
	}
	// A Remove may have moved the root (with this lock file) away while
	// Use waited: the lock must still be the root's.
	fi, err1 := f.Stat()
	cur, err2 := os.Stat(lock)
	if err1 != nil || err2 != nil || !os.SameFile(fi, cur) {
		f.Close()
		return nil, notFound(img.Ref, "removed from the store")
	}
	t := now()
	os.Chtimes(lock, t, t) // LastUsed; best effort
	var once sync.Once
	return func() { once.Do(func() { f.Close() }) }, nil
}

// inUse reports whether a Use holds the root chain, by trying its lock.
func (s *Store) inUse(chain string) bool {
	unlock, err := s.lockRoot(chain)
	if err != nil {
		return errors.Is(err, errLocked)
	}
	unlock()
	return false
}

// lockRoot takes the root chain's use lock exclusively, without waiting:
// errLocked if a Use holds it.
func (s *Store) lockRoot(chain string) (func(), error) {
	lock := filepath.Join(s.rootDir(chain), "lock")
	f, err := os.OpenFile(lock, os.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, errLocked
		}
		return nil, err
	}
	return func() { f.Close() }, nil
}

// touch creates the file name if missing and sets its times to now.
func touch(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	t := now()
	return os.Chtimes(name, t, t)
}

// inode is the identity of the file fi, and whether it has other links.
func inode(fi fs.FileInfo) ([2]uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return [2]uint64{}, false
	}
	return [2]uint64{st.Dev, st.Ino}, st.Nlink > 1
}

// removeAll removes the tree at dir, making its directories writable
// first: an image's read-only directories would stop os.RemoveAll when
// not running as root. Errors are ignored: what it leaves is in tmp/,
// removed at the next Open.
func removeAll(dir string) {
	parent, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return
	}
	defer parent.Close()
	if err := removeAt(parent, filepath.Base(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		os.RemoveAll(dir)
	}
}
