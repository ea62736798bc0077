package workspace

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/ctxio"
	"github.com/execbox/execbox/internal/dirfd"
)

// Upload unpacks the tar stream r into the directory at path, created
// (with its parents, mode 0755) if missing. It streams: no file is held in
// memory.
//
// Entries are confined to that directory, not only to the workspace: a
// name that is absolute or leaves it with ".." is a *FieldError (field
// "tar") of kind ErrPermission naming the entry, and so is a hard link to
// such a name. Symlinks are created as they are, whatever they point to;
// a later entry that would be written through one out of the directory is
// refused with ErrPermission. Regular files are written to a temporary
// file and renamed into place, so an existing file, symlink or hard link
// is replaced, never written through; a directory entry replaces a
// non-directory. Hard links are made only to entries inside the directory.
//
// Permission bits and modification times are kept (not those of symlinks);
// setuid, setgid and sticky bits and owners are not: new entries belong to
// the workspace owner (see Chown). Directory permissions are applied after
// all entries, so a read-only directory can still be filled. Character and
// block devices and FIFOs are skipped (they carry no data, and creating
// devices would be a privilege); other entry types are ErrInvalidArgument.
//
// Cancelling ctx stops the upload between reads of r. Upload is not
// atomic: after an error, the entries before the failing one remain.
func (w *Workspace) Upload(ctx context.Context, path string, r io.Reader) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rel, err := w.Resolve("path", path)
	if err != nil {
		return err
	}
	if err := w.mkdirAll(w.root, rel, defaultDirMode); err != nil {
		return wrap("upload", rel, err)
	}
	dst, err := openRoot(w.root, rel)
	if err != nil {
		return wrap("upload", rel, err)
	}
	defer dst.Close()
	x := &extractor{w: w, r: dst, base: rel, op: "upload"}
	err = x.untar(ctx, r)
	if ferr := x.finish(); err == nil {
		err = ferr
	}
	return err
}

func (x *extractor) untar(ctx context.Context, r io.Reader) error {
	tr := tar.NewReader(ctxio.Reader(ctx, r))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if errors.Is(err, tar.ErrInsecurePath) && hdr != nil {
			err = nil // with GODEBUG=tarinsecurepath=0; entryName decides
		}
		if err != nil {
			if errors.Is(err, tar.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fail(x.op, x.base, execbox.ErrInvalidArgument, fmt.Errorf("bad tar stream: %w", err))
			}
			return wrap(x.op, x.base, err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue // the directory itself: its mode and time are the caller's
		}
		mode := fs.FileMode(hdr.Mode) & fs.ModePerm
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = x.dir(name, mode, hdr.ModTime)
		case tar.TypeReg, tar.TypeGNUSparse, tar.TypeCont:
			err = x.file(ctx, name, tr, mode, hdr.ModTime)
		case tar.TypeSymlink:
			err = x.symlink(name, hdr.Linkname)
		case tar.TypeLink:
			target, terr := entryName(hdr.Linkname)
			if terr != nil {
				return &execbox.FieldError{
					Field:   "tar",
					Problem: fmt.Sprintf("entry %q links to %q, outside the target directory", hdr.Name, hdr.Linkname),
					Kind:    execbox.ErrPermission,
				}
			}
			err = x.link(name, target)
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo, tar.TypeXGlobalHeader:
			// Skipped; see Upload.
		default:
			return execbox.Invalid("tar", "entry %q has unsupported type %q", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			return x.fail(name, err)
		}
	}
}

// entryName checks a tar entry name (or hard link target) and returns it
// as a clean relative path; "." is the directory itself.
func entryName(n string) (string, error) {
	if n == "" || strings.IndexByte(n, 0) >= 0 {
		return "", execbox.Invalid("tar", "entry name %q is empty or contains a NUL byte", n)
	}
	c := path.Clean(n)
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return "", &execbox.FieldError{
			Field:   "tar",
			Problem: fmt.Sprintf("entry %q is outside the target directory", n),
			Kind:    execbox.ErrPermission,
		}
	}
	return filepath.FromSlash(c), nil
}

// extractor creates entries (from a tar stream or a host tree) in a root.
type extractor struct {
	w    *Workspace
	r    *os.Root // destination
	base string   // r's path relative to the workspace, for messages
	op   string   // for messages: "upload", "asset"

	dirs []dirMeta // applied by finish
	made string    // a directory known to exist, to skip mkdirAll
}

type dirMeta struct {
	name  string
	mode  fs.FileMode
	mtime time.Time
}

// fail explains err, a failure on the entry name.
func (x *extractor) fail(name string, err error) error {
	return wrap(x.op, filepath.Join(x.base, name), err)
}

// parent makes sure the parent directory of name exists.
func (x *extractor) parent(name string) error {
	dir := filepath.Dir(name)
	if dir == "." || dir == x.made {
		return nil
	}
	if err := x.w.mkdirAll(x.r, dir, defaultDirMode); err != nil {
		return err
	}
	x.made = dir
	return nil
}

// clear removes a non-directory at name (an empty directory too), so that
// something else can be created there.
func (x *extractor) clear(name string) error {
	x.made = ""
	err := x.r.Remove(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// dir creates the directory name, replacing a non-directory. Its mode and
// time are set by finish.
func (x *extractor) dir(name string, mode fs.FileMode, mtime time.Time) error {
	fi, err := x.r.Lstat(name)
	switch {
	case err == nil && fi.IsDir():
	case err == nil:
		if err := x.clear(name); err != nil {
			return err
		}
		fallthrough
	case errors.Is(err, fs.ErrNotExist):
		if err := x.parent(name); err != nil {
			return err
		}
		// Owner rwx until finish, so the entries inside can be created.
		if err := x.w.mkdir(x.r, name, mode|0o700); err != nil {
			return err
		}
	default:
		return err
	}
	x.dirs = append(x.dirs, dirMeta{name, mode, mtime})
	return nil
}

// file writes the regular file name from src.
func (x *extractor) file(ctx context.Context, name string, src io.Reader, mode fs.FileMode, mtime time.Time) error {
	if err := x.parent(name); err != nil {
		return err
	}
	return x.w.writeFile(ctx, x.r, name, src, fileSpec{perm: mode, mtime: mtime})
}

// symlink creates name pointing to target, replacing what is at name.
// target is not checked: os.Root never follows it out.
func (x *extractor) symlink(name, target string) error {
	if target == "" || strings.IndexByte(target, 0) >= 0 {
		return fmt.Errorf("symlink target %q: %w", target, syscall.EINVAL)
	}
	if err := x.parent(name); err != nil {
		return err
	}
	if err := x.clear(name); err != nil {
		return err
	}
	if err := x.r.Symlink(target, name); err != nil {
		return err
	}
	return x.w.chownNew(x.r, name)
}

// link creates name as a hard link to target, both in x.r.
func (x *extractor) link(name, target string) error {
	if name == target {
		return nil
	}
	if err := x.parent(name); err != nil {
		return err
	}
	if err := x.clear(name); err != nil {
		return err
	}
	return x.r.Link(target, name)
}

// finish applies the modes and times of directories, deepest last-created
// first, after their content is in place.
func (x *extractor) finish() error {
	var first error
	for i := len(x.dirs) - 1; i >= 0; i-- {
		d := x.dirs[i]
		err := x.setDir(d)
		// Gone or replaced since (by a later entry or a command): it is
		// not the directory the entry made, so it keeps what it has.
		replaced := errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR)
		if err != nil && first == nil && !replaced {
			first = x.fail(d.name, err)
		}
	}
	x.dirs = nil
	return first
}

// setDir sets the mode and time of the directory d.name, through a
// descriptor of it: a symlink put in its place since (by a later entry or
// by a command) is refused, not followed.
func (x *extractor) setDir(d dirMeta) error {
	f, err := dirfd.OpenNoFollow(x.r, d.name, os.O_RDONLY|oDirectory)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chmod(d.mode); err != nil {
		return err
	}
	if d.mtime.IsZero() {
		return nil
	}
	return setMtime(x.r, f, d.name, d.mtime)
}

// Download writes the tree at path to w as a tar stream: for a directory,
// its entries below it (named relative to it, in name order; the
// directory itself is not an entry); for anything else, one entry named
// after its base name. Symlinks are written as symlinks, never followed;
// files with several links inside the tree as one file and hard links.
// Sockets, devices and FIFOs are skipped, and so is an entry replaced
// during the walk. Only permission bits and modification times (to the
// second) are recorded, not owners. A file that shrinks while it is read
// is padded with zeros, as GNU tar does.
//
// The files' bytes in the stream add up to at most the size of the
// workspace's file system, which a tree can only exceed with sparse
// files (truncate -s 1T: a hole is written as the zeros it reads as): a
// larger tree is ErrResourceExhausted, so that a sandbox cannot make its
// host read and store far more than its workspace quota.
//
// The stream is complete (with its end-of-archive marker) only if
// Download returns nil. Cancelling ctx stops it between reads.
func (w *Workspace) Download(ctx context.Context, path string, wr io.Writer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rel, err := w.Resolve("path", path)
	if err != nil {
		return err
	}
	fi, err := w.root.Lstat(rel)
	if err != nil {
		return wrap("download", rel, err)
	}
	d := &downloader{ctx: ctx, tw: tar.NewWriter(wr), links: map[fileKey]string{}, left: capacity(w.root)}
	if fi.IsDir() {
		dir, derr := openDir(w.root, rel, fi)
		if derr != nil {
			return wrap("download", rel, derr)
		}
		defer dir.Close()
		err = walkDirs(dir, rel, func(r *os.Root, name, erel string, fi fs.FileInfo) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			tname, err := filepath.Rel(rel, erel)
			if err != nil {
				return err
			}
			return wrap("download", erel, d.entry(r, name, filepath.ToSlash(tname), fi))
		})
	} else {
		parent, perr := openRoot(w.root, filepath.Dir(rel))
		if perr != nil {
			return wrap("download", rel, perr)
		}
		defer parent.Close()
		name := filepath.Base(rel)
		err = wrap("download", rel, d.entry(parent, name, name, fi))
	}
	if err != nil {
		return err
	}
	return wrap("download", rel, d.tw.Close())
}

// downloader writes entries to a tar stream.
type downloader struct {
	ctx   context.Context
	tw    *tar.Writer
	links map[fileKey]string // files with several links, by first name
	left  int64              // bytes of file data still allowed; -1: no bound
}

// entry writes the file name of r, described by fi, as tname.
func (d *downloader) entry(r *os.Root, name, tname string, fi fs.FileInfo) error {
	hdr := &tar.Header{
		Name:    tname,
		Mode:    int64(fi.Mode().Perm()),
		ModTime: fi.ModTime(),
	}
	switch {
	case fi.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return d.tw.WriteHeader(hdr)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := r.Readlink(name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		return d.tw.WriteHeader(hdr)
	case fi.Mode().IsRegular():
		return d.file(r, name, hdr, fi)
	}
	return nil // sockets, devices, FIFOs
}

// file writes the regular file name of r, described by fi (from Lstat).
func (d *downloader) file(r *os.Root, name string, hdr *tar.Header, fi fs.FileInfo) error {
	key, multi := keyOf(fi)
	if first, ok := d.links[key]; multi && ok {
		hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
		return d.tw.WriteHeader(hdr)
	}
	f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	ffi, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(fi, ffi) || !ffi.Mode().IsRegular() {
		return nil // replaced since Lstat (perhaps by a symlink): skip
	}
	if d.left >= 0 {
		if ffi.Size() > d.left {
			return fmt.Errorf("%w: the tree holds more bytes than its file system (%s: %d bytes; sparse files?)", errLargerThanFS, hdr.Name, ffi.Size())
		}
		d.left -= ffi.Size()
	}
	if multi {
		d.links[key] = hdr.Name
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, ffi.Size()
	if err := d.tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.CopyN(d.tw, ctxio.Reader(d.ctx, f), hdr.Size)
	if err == io.EOF {
		// The file shrank: pad, so the archive stays well-formed.
		_, err = io.CopyN(d.tw, zeros{}, hdr.Size-n)
	}
	return err
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
