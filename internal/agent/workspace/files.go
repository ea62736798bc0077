package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/ctxio"
	"github.com/execbox/execbox/internal/dirfd"
)

// Default permissions.
const (
	defaultFileMode fs.FileMode = 0o644
	defaultDirMode  fs.FileMode = 0o755
)

// ReadFile returns the content of the regular file at path, following
// symlinks inside the workspace. A file larger than opts.Limit is
// ErrResourceExhausted, found without reading it; anything but a regular
// file (directory, FIFO, device) is ErrInvalidArgument. Opening never
// blocks on a FIFO.
func (w *Workspace) ReadFile(ctx context.Context, path string, opts execbox.ReadOptions) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := opts.Limit
	switch {
	case limit < 0:
		return nil, execbox.Invalid("limit", "must not be negative")
	case limit == 0:
		limit = execbox.DefaultReadLimit
	}
	rel, err := w.Resolve("path", path)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK: a FIFO planted at path must not hang the call; it has
	// no effect on regular files.
	f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, wrap("read", rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, wrap("read", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fail("read", rel, execbox.ErrInvalidArgument, fmt.Errorf("%w (%s)", errNotRegular, typeName(fi.Mode())))
	}
	if fi.Size() > limit {
		return nil, fail("read", rel, execbox.ErrResourceExhausted, fmt.Errorf("%w: %d bytes, limit %d", errTooLarge, fi.Size(), limit))
	}
	// The file may grow while it is read: read at most limit+1 bytes.
	data := make([]byte, 0, fi.Size()+1)
	r := io.LimitReader(ctxio.Reader(ctx, f), limit+1)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, wrap("read", rel, err)
		}
	}
	if int64(len(data)) > limit {
		return nil, fail("read", rel, execbox.ErrResourceExhausted, fmt.Errorf("%w: more than %d bytes", errTooLarge, limit))
	}
	return data, nil
}

// WriteFile creates or replaces the file at path with data. A new file
// gets opts.Mode (0644 when zero); a replaced file keeps its permission
// unless opts.Mode is set. The file is written to a temporary file in the
// same directory and renamed into place, so readers see the old or the
// new content, never a mix (it is not synced to disk: a crash may lose
// it), and a hard link at path is replaced, not written through. If path
// is a symlink, its target, which must be inside the workspace, is
// overwritten in place instead, unless that target has several hard links
// (ErrPermission). With opts.Parents, missing
// directories are created with mode 0755; without it a missing parent is
// ErrNotFound. A directory at path is ErrInvalidArgument.
func (w *Workspace) WriteFile(ctx context.Context, path string, data []byte, opts execbox.WriteOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if opts.Mode&^fs.ModePerm != 0 {
		return execbox.Invalid("mode", "%v is not a permission (want bits of 0777 only)", opts.Mode)
	}
	rel, err := w.Resolve("path", path)
	if err != nil {
		return err
	}
	if rel == "." {
		return execbox.Invalid("path", "is the workspace directory")
	}
	if opts.Parents {
		if err := w.mkdirAll(w.root, filepath.Dir(rel), defaultDirMode); err != nil {
			return wrap("write", rel, err)
		}
	}
	spec := fileSpec{perm: opts.Mode, follow: true}
	if spec.perm == 0 {
		spec.perm, spec.keepPerm = defaultFileMode, true
	}
	return wrap("write", rel, w.writeFile(ctx, w.root, rel, bytes.NewReader(data), spec))
}

// fileSpec says how writeFile writes a file.
type fileSpec struct {
	perm     fs.FileMode // permission bits of the file
	keepPerm bool        // a replaced regular file keeps its own permission
	mtime    time.Time   // modification time; zero means now
	follow   bool        // a final symlink is followed (inside r) and its target overwritten in place
}

// writeFile writes src to name in r (whose parent must exist), replacing
// what is there by renaming a temporary file over it, so that a symlink or
// hard link at name is replaced, never written through (unless s.follow).
func (w *Workspace) writeFile(ctx context.Context, r *os.Root, name string, src io.Reader, s fileSpec) error {
	fi, err := r.Lstat(name)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0 && s.follow:
		return w.writeInPlace(ctx, r, name, src, s)
	case err == nil && fi.IsDir():
		return &fs.PathError{Op: "write", Path: name, Err: syscall.EISDIR}
	case err == nil && fi.Mode().IsRegular() && s.keepPerm:
		s.perm = fi.Mode().Perm()
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}

	// O_CREATE|O_EXCL never follows a symlink, and the random name is not
	// one another writer uses.
	tmp := filepath.Join(filepath.Dir(name), fmt.Sprintf(".execbox-%016x.tmp", rand.Uint64()))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			r.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, ctxio.Reader(ctx, src)); err != nil {
		return err
	}
	// fchmod is exact (no umask) and cannot be redirected by a rename.
	if err := f.Chmod(s.perm); err != nil {
		return err
	}
	if err := w.fchownNew(f); err != nil {
		return err
	}
	if !s.mtime.IsZero() {
		if err := setMtime(r, f, tmp, s.mtime); err != nil {
			return err
		}
	}
	done = true
	if err := f.Close(); err != nil {
		r.Remove(tmp)
		return err
	}
	if err := r.Rename(tmp, name); err != nil {
		r.Remove(tmp)
		return err
	}
	return nil
}

// writeInPlace overwrites the file name of r, following symlinks inside r.
// It refuses anything but a regular file, and a file with several hard
// links: one of them may be outside the workspace, planted by a command.
// The check comes before truncating.
func (w *Workspace) writeInPlace(ctx context.Context, r *os.Root, name string, src io.Reader, s fileSpec) error {
	// O_NONBLOCK: opening a FIFO without a reader fails (ENXIO) instead of
	// blocking.
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, s.perm)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (%s)", errNotRegular, typeName(fi.Mode()))
	}
	if _, multi := keyOf(fi); multi {
		return errHardLinked
	}
	// The agent may write what the workspace owner may not (a file of
	// root's in the workspace); a symlink the owner planted must not lend
	// it that.
	if o := w.owner.Load(); o != nil && !mayWrite(fi, o) {
		return errNotOwnersToWrite
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := io.Copy(f, ctxio.Reader(ctx, src)); err != nil {
		return err
	}
	if !s.keepPerm {
		if err := f.Chmod(s.perm); err != nil {
			return err
		}
	}
	return f.Close()
}

// Stat describes the file at path without following a final symlink; for
// a symlink, Target is its destination.
func (w *Workspace) Stat(ctx context.Context, path string) (execbox.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return execbox.FileInfo{}, err
	}
	rel, err := w.Resolve("path", path)
	if err != nil {
		return execbox.FileInfo{}, err
	}
	fi, err := w.root.Lstat(rel)
	if err != nil {
		return execbox.FileInfo{}, wrap("stat", rel, err)
	}
	info := fileInfo(rel, fi)
	if fi.Mode()&fs.ModeSymlink != 0 {
		if info.Target, err = w.root.Readlink(rel); err != nil {
			return execbox.FileInfo{}, wrap("stat", rel, err)
		}
	}
	return info, nil
}

// fileInfo converts an Lstat result of the file at rel.
func fileInfo(rel string, fi fs.FileInfo) execbox.FileInfo {
	return execbox.FileInfo{
		Path:    filepath.ToSlash(rel),
		Name:    fi.Name(),
		Size:    fi.Size(),
		Mode:    fi.Mode(),
		ModTime: fi.ModTime(),
	}
}

// List returns the entries of the directory at path (following symlinks
// inside the workspace), sorted by name, each described as Stat does.
// Entries removed while listing are left out.
func (w *Workspace) List(ctx context.Context, path string) ([]execbox.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rel, err := w.Resolve("path", path)
	if err != nil {
		return nil, err
	}
	dir, err := openRoot(w.root, rel)
	if err != nil {
		return nil, wrap("list", rel, err)
	}
	defer dir.Close()
	names, err := readNames(dir)
	if err != nil {
		return nil, wrap("list", rel, err)
	}
	infos := make([]execbox.FileInfo, 0, len(names))
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		erel := filepath.Join(rel, name)
		fi, err := dir.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, wrap("list", erel, err)
		}
		info := fileInfo(erel, fi)
		if fi.Mode()&fs.ModeSymlink != 0 {
			info.Target, err = dir.Readlink(name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, wrap("list", erel, err)
			}
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// Mkdir creates the directory at path with opts.Mode (0755 when zero,
// applied exactly). An existing path is ErrInvalidArgument (also matching
// fs.ErrExist) and a missing parent ErrNotFound, unless opts.Parents: then
// missing parents are created with mode 0755 and an existing directory is
// accepted as it is.
func (w *Workspace) Mkdir(ctx context.Context, path string, opts execbox.MkdirOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if opts.Mode&^fs.ModePerm != 0 {
		return execbox.Invalid("mode", "%v is not a permission (want bits of 0777 only)", opts.Mode)
	}
	mode := opts.Mode
	if mode == 0 {
		mode = defaultDirMode
	}
	rel, err := w.Resolve("path", path)
	if err != nil {
		return err
	}
	if opts.Parents {
		return wrap("mkdir", rel, w.mkdirAll(w.root, rel, mode))
	}
	if rel == "." {
		return wrap("mkdir", rel, &fs.PathError{Op: "mkdir", Path: rel, Err: syscall.EEXIST})
	}
	return wrap("mkdir", rel, w.mkdir(w.root, rel, mode))
}

// mkdir creates the directory name in r with exactly perm, owned by the
// workspace owner.
func (w *Workspace) mkdir(r *os.Root, name string, perm fs.FileMode) error {
	if err := r.Mkdir(name, perm); err != nil {
		return err
	}
	// Mkdir applied the umask. fchmod and fchown through a descriptor
	// that is the directory, never a symlink a command put in its place
	// meanwhile.
	d, err := dirfd.OpenNoFollow(r, name, os.O_RDONLY|oDirectory)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Chmod(perm); err != nil {
		return err
	}
	return w.fchownNew(d)
}

// mkdirAll makes sure the directory name exists in r, creating what is
// missing: name with perm, its parents with 0755. Existing symlinks to
// directories inside r are followed.
func (w *Workspace) mkdirAll(r *os.Root, name string, perm fs.FileMode) error {
	if name == "." {
		return nil
	}
	if fi, err := r.Stat(name); err == nil && fi.IsDir() {
		return nil
	}
	parts := strings.Split(name, string(filepath.Separator))
	for i := range parts {
		p := filepath.Join(parts[:i+1]...)
		mode := defaultDirMode
		if i == len(parts)-1 {
			mode = perm
		}
		err := w.mkdir(r, p, mode)
		if err == nil || !errors.Is(err, fs.ErrExist) {
			if err != nil {
				return err
			}
			continue
		}
		fi, err := r.Stat(p)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
		}
	}
	return nil
}

// Remove removes the file, symlink (not its target) or empty directory at
// path; with opts.Recursive, a directory and everything in it. A missing
// path is ErrNotFound, a non-empty directory without Recursive
// ErrInvalidArgument. The workspace directory itself cannot be removed.
func (w *Workspace) Remove(ctx context.Context, path string, opts execbox.RemoveOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rel, err := w.Resolve("path", path)
	if err != nil {
		return err
	}
	if rel == "." {
		return execbox.Invalid("path", "is the workspace directory, which cannot be removed")
	}
	if !opts.Recursive {
		return wrap("remove", rel, w.root.Remove(rel))
	}
	// RemoveAll accepts a missing path; Files.Remove does not.
	if _, err := w.root.Lstat(rel); err != nil {
		return wrap("remove", rel, err)
	}
	return wrap("remove", rel, w.root.RemoveAll(rel))
}

// typeName names the type of a file mode for messages.
func typeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
