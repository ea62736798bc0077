//go:build linux

package dirfd

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrNotFIFO: the entry is not the FIFO that was asked for (it was
// replaced, by a symlink or a file).
var ErrNotFIFO = errors.New("not a FIFO")

// Dir is an open directory. Its methods are safe for concurrent use; Close
// must come after the last of them.
type Dir struct {
	path string

	// mu guards the descriptor against Close: a number closed and reused
	// would make an unlinkat act on another directory. Each operation
	// holds a reference (an open of a FIFO may block for long); the last
	// one out after Close closes the descriptor.
	mu     sync.Mutex
	refs   int
	closed bool

	root *os.Root // for RemoveAll of what a user left in it
	fd   int      // root's own directory, O_DIRECTORY
	f    *os.File // owns fd
}

// MkdirTemp makes a new directory in base, as os.MkdirTemp does (mode
// 0700, owned by the caller), and opens it. Until the caller hands it to
// another user (Chown), nobody else can reach into it, so the descriptor
// is the directory that was made.
func MkdirTemp(base, pattern string) (*Dir, error) {
	path, err := os.MkdirTemp(base, pattern)
	if err != nil {
		return nil, err
	}
	d, err := Open(path)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	return d, nil
}

// Open opens the directory at path, refusing a symlink there.
func Open(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	// os.Root has no constructor from a descriptor: open it by path and
	// check it is the directory already open.
	root, err := os.OpenRoot(path)
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := sameDir(f, root); err != nil {
		root.Close()
		f.Close()
		return nil, err
	}
	return &Dir{path: path, root: root, fd: fd, f: f}, nil
}

// Path is the path the directory was opened at, for programs that are
// given it (they run as the user who can change it, so it binds only them).
func (d *Dir) Path() string { return d.path }

// Close closes the descriptor; it does not remove the directory. Any
// call after it fails with fs.ErrClosed.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	if d.refs == 0 {
		return d.closeFD()
	}
	return nil
}

func (d *Dir) closeFD() error {
	d.root.Close()
	return d.f.Close()
}

// hold takes a reference to the descriptor for one operation on name
// ("." for the directory itself); release it with d.release.
func (d *Dir) hold(op, name string) error {
	if name != "." {
		if err := checkName(name); err != nil {
			return err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return &fs.PathError{Op: op, Path: d.path + "/" + name, Err: fs.ErrClosed}
	}
	d.refs++
	return nil
}

func (d *Dir) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refs--
	if d.closed && d.refs == 0 {
		d.closeFD()
	}
}

// Chown gives the directory itself to uid and gid (-1 keeps one).
func (d *Dir) Chown(uid, gid int) error {
	if err := d.hold("chown", "."); err != nil {
		return err
	}
	defer d.release()
	return d.err("chown", ".", unix.Fchown(d.fd, uid, gid))
}

// WriteFile creates the entry name with data, replacing what was there
// (unlinked, never written through), with exactly mode perm, and owned by
// uid and gid when uid or gid is not -1.
func (d *Dir) WriteFile(name string, data []byte, perm fs.FileMode, uid, gid int) error {
	if err := d.hold("write", name); err != nil {
		return err
	}
	defer d.release()
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && err != unix.ENOENT {
		return d.err("unlink", name, err)
	}
	fd, err := unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return d.err("create", name, err)
	}
	f := os.NewFile(uintptr(fd), d.path+"/"+name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if uid != -1 || gid != -1 {
		if err := f.Chown(uid, gid); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// Mkfifo creates the FIFO name (mode 0600), replacing what was there,
// owned by uid and gid when uid or gid is not -1. The chown goes through
// a descriptor of what was checked to be a FIFO, so a FIFO replaced in
// between by a symlink or a file is refused, never followed.
func (d *Dir) Mkfifo(name string, uid, gid int) error {
	if err := d.hold("mkfifo", name); err != nil {
		return err
	}
	defer d.release()
	// Whatever a user left at the name is theirs to lose, not a reason to
	// fail.
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && err != unix.ENOENT {
		return d.err("unlink", name, err)
	}
	if err := unix.Mkfifoat(d.fd, name, 0o600); err != nil {
		return d.err("mkfifo", name, err)
	}
	return d.chownFIFO(name, uid, gid)
}

// ChownFIFO gives the FIFO name to uid and gid (-1 keeps one), through a
// descriptor of what was checked to be a FIFO.
func (d *Dir) ChownFIFO(name string, uid, gid int) error {
	if err := d.hold("chown", name); err != nil {
		return err
	}
	defer d.release()
	return d.chownFIFO(name, uid, gid)
}

func (d *Dir) chownFIFO(name string, uid, gid int) error {
	if uid == -1 && gid == -1 {
		return nil
	}
	// O_PATH: opening a FIFO for real would block or need a peer.
	fd, err := unix.Openat(d.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return d.err("open", name, err)
	}
	defer unix.Close(fd)
	if err := isFIFO(fd); err != nil {
		return d.err("chown", name, err)
	}
	return d.err("chown", name, unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH))
}

// OpenFIFO opens the FIFO name with flag (O_RDONLY, O_WRONLY or O_RDWR,
// with O_NONBLOCK if wanted); anything else there, a symlink included, is
// refused before a byte is read or written.
func (d *Dir) OpenFIFO(name string, flag int) (*os.File, error) {
	if err := d.hold("open", name); err != nil {
		return nil, err
	}
	defer d.release()
	fd, err := unix.Openat(d.fd, name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, d.err("open", name, err)
	}
	if err := isFIFO(fd); err != nil {
		unix.Close(fd)
		return nil, d.err("open", name, err)
	}
	return os.NewFile(uintptr(fd), d.path+"/"+name), nil
}

// Remove unlinks the entry name (a file, FIFO or symlink; not a
// directory). A missing entry is not an error.
func (d *Dir) Remove(name string) error {
	if err := d.hold("remove", name); err != nil {
		return err
	}
	defer d.release()
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && err != unix.ENOENT {
		return d.err("remove", name, err)
	}
	return nil
}

// RemoveAll removes everything in the directory, whatever a user put
// there (symlinks are removed, not followed), then the directory itself
// if its path still names it.
func (d *Dir) RemoveAll() error {
	if err := d.hold("remove", "."); err != nil {
		return err
	}
	defer d.release()
	names, err := d.f.ReadDir(-1)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range names {
		errs = append(errs, d.root.RemoveAll(e.Name()))
	}
	// rmdir never follows a symlink at path: if a user renamed the
	// directory and put something else there, it fails and removes
	// nothing but an empty directory.
	if err := unix.Rmdir(d.path); err != nil && err != unix.ENOENT {
		errs = append(errs, &fs.PathError{Op: "remove", Path: d.path, Err: err})
	}
	return errors.Join(errs...)
}

func (d *Dir) err(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: d.path + "/" + name, Err: err}
}

// checkName refuses anything but one name in the directory.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return &fs.PathError{Op: "open", Path: name, Err: unix.EINVAL}
	}
	return nil
}

func isFIFO(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return ErrNotFIFO
	}
	return nil
}

// sameDir checks that root is the directory f.
func sameDir(f *os.File, root *os.Root) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	rfi, err := root.Stat(".")
	if err != nil {
		return err
	}
	if !os.SameFile(fi, rfi) {
		return &fs.PathError{Op: "open", Path: f.Name(), Err: errors.New("directory replaced while opening")}
	}
	return nil
}
