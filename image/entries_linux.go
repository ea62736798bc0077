//go:build linux

package image

import (
	"archive/tar"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/dirfd"
)

const (
	whPrefix = ".wh."         // .wh.NAME removes NAME of earlier layers
	whOpaque = ".wh..wh..opq" // empties its directory of earlier layers
	// permMask keeps permission and sticky bits: setuid and setgid are
	// stripped, since the cache is on the host, where a setuid-root file
	// would be an escalation for whoever can reach it.
	permMask = 0o1777
)

// whiteout applies the whiteout file base of the directory dir.
func (a *applier) whiteout(dir, base string) error {
	switch {
	case base == whOpaque:
		return a.opaque(dir)
	case strings.HasPrefix(base, whPrefix+whPrefix):
		return nil // other AUFS metadata (.wh..wh.plnk): not a whiteout
	}
	target := strings.TrimPrefix(base, whPrefix)
	name := path.Join(dir, target)
	if target == "" || target == "." || target == ".." || a.kept[name] {
		return nil // names nothing; or written by this layer: not hidden
	}
	p, err := a.openDir(dir)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil // nothing below to hide
	}
	if err != nil {
		return err
	}
	defer p.Close()
	a.forget(name)
	return removeAt(p, path.Base(name))
}

// opaque removes everything in dir that earlier layers put there: what
// this layer has in it, before or after the marker, stays.
func (a *applier) opaque(dir string) error {
	a.keep(dir)
	p, err := a.parent(path.Join(dir, whOpaque))
	if err != nil {
		return err
	}
	defer p.Close()
	return a.clearExcept(p, dir)
}

// clearExcept removes the entries of the directory d (named dir) that
// this layer did not write, descending into those it did.
func (a *applier) clearExcept(d *os.File, dir string) error {
	names, err := readNames(d)
	if err != nil {
		return err
	}
	for _, n := range names {
		full := path.Join(dir, n)
		if !a.kept[full] {
			a.forget(full)
			if err := removeAt(d, n); err != nil {
				return err
			}
			continue
		}
		fd, err := unix.Openat(int(d.Fd()), n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOTDIR || err == unix.ELOOP {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "open", Path: full, Err: err}
		}
		sub := os.NewFile(uintptr(fd), full)
		err = a.clearExcept(sub, full)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// forget drops the directory metadata of name and everything below it.
func (a *applier) forget(name string) {
	for n := range a.dirs {
		if n == name || strings.HasPrefix(n, name+"/") {
			delete(a.dirs, n)
		}
	}
}

// dir creates the directory name, or keeps the one there.
func (a *applier) dir(name string, hdr *tar.Header) error {
	p, err := a.parent(name)
	if err != nil {
		return err
	}
	defer p.Close()
	base := path.Base(name)
	var st unix.Stat_t
	err = unix.Fstatat(int(p.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		err = removeAt(p, base)
		if err == nil {
			err = unix.ENOENT
		}
	}
	if err == unix.ENOENT {
		// Owner rwx until finish, so that entries can be created inside.
		err = unix.Mkdirat(int(p.Fd()), base, 0o700)
	}
	if err != nil {
		return err
	}
	fd, err := unix.Openat(int(p.Fd()), base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := a.own(f, hdr); err != nil {
		return err
	}
	a.dirs[name] = dirMeta{mode: uint32(hdr.Mode) & permMask, hdr: hdr}
	return nil
}

// file writes the regular file name from r, replacing what is there.
func (a *applier) file(name string, hdr *tar.Header, r io.Reader) error {
	p, err := a.parent(name)
	if err != nil {
		return err
	}
	defer p.Close()
	if hdr.Size > a.left {
		return &kindError{execbox.ErrResourceExhausted, fmt.Errorf("%d bytes: the image holds more than the cache's file system", hdr.Size)}
	}
	a.left -= hdr.Size
	base := path.Base(name)
	if err := removeAt(p, base); err != nil {
		return err
	}
	fd, err := unix.Openat(int(p.Fd()), base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := copySparse(f, r); err != nil {
		return err
	}
	if err := a.own(f, hdr); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, uint32(hdr.Mode)&permMask); err != nil {
		return err
	}
	if err := setTimes(f, hdr); err != nil {
		return err
	}
	return f.Close()
}

// copySparse copies r to the new file f, seeking over blocks of zeros
// instead of writing them: a sparse entry of the tar (its holes read as
// zeros) stays sparse on disk, and costs no disk for its holes.
func copySparse(f *os.File, r io.Reader) error {
	buf := make([]byte, 64<<10)
	var zeros [64 << 10]byte
	var off int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if bytes.Equal(buf[:n], zeros[:n]) {
				_, serr := f.Seek(int64(n), io.SeekCurrent)
				err = cmp.Or(serr, err)
			} else if _, werr := f.Write(buf[:n]); werr != nil {
				return werr
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return f.Truncate(off) // the length of trailing holes
		}
		if err != nil {
			return err
		}
	}
}

// symlink creates name pointing to hdr.Linkname, whatever it points to:
// nothing ever follows it out of the root (see openDir).
func (a *applier) symlink(name string, hdr *tar.Header) error {
	if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 {
		return unix.EINVAL
	}
	p, err := a.parent(name)
	if err != nil {
		return err
	}
	defer p.Close()
	base := path.Base(name)
	if err := removeAt(p, base); err != nil {
		return err
	}
	if err := unix.Symlinkat(hdr.Linkname, int(p.Fd()), base); err != nil {
		return err
	}
	if a.asRoot {
		if err := unix.Fchownat(int(p.Fd()), base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	return unix.UtimesNanoAt(int(p.Fd()), base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// link makes name a hard link to hdr.Linkname, an entry already in the
// root, found without following any symlink.
func (a *applier) link(name string, hdr *tar.Header) error {
	target, err := entryName(hdr.Linkname)
	if err != nil || target == name {
		return err
	}
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	tfd, err := unix.Openat2(int(a.root.Fd()), path.Dir(target), &how)
	if err != nil {
		return &os.PathError{Op: "link target", Path: target, Err: err}
	}
	defer unix.Close(tfd)
	p, err := a.parent(name)
	if err != nil {
		return err
	}
	defer p.Close()
	base := path.Base(name)
	if err := removeAt(p, base); err != nil {
		return err
	}
	// Flags 0: a symlink as target is linked itself, not followed.
	return unix.Linkat(tfd, path.Base(target), int(p.Fd()), base, 0)
}

// own gives f the ids of hdr when running as root, and the user.* extended
// attributes of hdr. security.* (file capabilities, SELinux labels),
// trusted.* (overlayfs's own whiteouts and opaque markers) and system.*
// (ACLs) are never applied.
func (a *applier) own(f *os.File, hdr *tar.Header) error {
	fd := int(f.Fd())
	if a.asRoot {
		if err := unix.Fchown(fd, hdr.Uid, hdr.Gid); err != nil {
			return err
		}
	}
	for k, v := range hdr.PAXRecords {
		attr, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok || !strings.HasPrefix(attr, "user.") {
			continue
		}
		err := unix.Fsetxattr(fd, attr, []byte(v), 0)
		if err == unix.ENOTSUP || err == unix.EPERM {
			continue // the cache's file system has no user xattrs here
		}
		if err != nil {
			return &os.PathError{Op: "setxattr " + attr, Path: f.Name(), Err: err}
		}
	}
	return nil
}

// setTimes sets f's mtime (and atime, when the tar has one) from hdr.
func setTimes(f *os.File, hdr *tar.Header) error {
	if hdr.ModTime.IsZero() {
		return nil
	}
	return dirfd.SetMtime(f, hdr.ModTime)
}

// removeAt removes the entry name of the directory d, a whole tree if it
// is a directory; a missing one is no error. Nothing is followed.
func removeAt(d *os.File, name string) error {
	err := unix.Unlinkat(int(d.Fd()), name, 0)
	if err == unix.EISDIR {
		err = removeTree(d, name)
	}
	if err == unix.ENOENT {
		return nil
	}
	return err
}

// removeTree removes the directory name of d and everything below it
// with two descriptors at most, whatever the depth: a hostile layer can
// build a tree deeper than the descriptor limit (through symlinks, each
// entry adds as many levels as a path holds), and one descriptor per
// level would leave it in the store for good. It walks down to a
// directory without subdirectories, empties and removes it, and goes
// back up through "..": the tree is the store's own, unpacked or being
// removed, and no other process changes it meanwhile.
func removeTree(d *os.File, name string) error {
	fd, err := unix.Openat(int(d.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { unix.Close(fd) }()
	var above []string // the names from d down to fd
	cur := name        // in fd
	for {
		sub, err := unix.Openat(fd, cur, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		child, err := emptyFiles(sub)
		if err != nil {
			unix.Close(sub)
			return err
		}
		if child != "" {
			unix.Close(fd)
			fd, above, cur = sub, append(above, cur), child
			continue
		}
		unix.Close(sub)
		if err := unix.Unlinkat(fd, cur, unix.AT_REMOVEDIR); err != nil {
			return err
		}
		if len(above) == 0 {
			return nil
		}
		up, err := unix.Openat(fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		unix.Close(fd)
		fd, cur, above = up, above[len(above)-1], above[:len(above)-1]
	}
}

// emptyFiles makes the directory fd writable (owner rwx, for a read-only
// directory of an image when not root), removes everything in it but
// directories, and returns the name of one directory left, "" if none.
func emptyFiles(fd int) (string, error) {
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return "", err
	}
	names, err := namesAt(fd)
	if err != nil {
		return "", err
	}
	dir := ""
	for _, n := range names {
		err := unix.Unlinkat(fd, n, 0)
		switch {
		case err == unix.EISDIR:
			dir = n
		case err != nil && err != unix.ENOENT:
			return "", err
		}
	}
	return dir, nil
}

// readNames lists the directory d from its start, through a descriptor
// of its own, so d's offset does not matter.
func readNames(d *os.File) ([]string, error) { return namesAt(int(d.Fd())) }

// namesAt is readNames of the directory descriptor dirfd.
func namesAt(dirfd int) ([]string, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}
