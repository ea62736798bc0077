package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/dirfd"
)

// Workspace is a directory in which every file access is confined. It is
// safe for concurrent use. Its methods implement execbox.Files.
type Workspace struct {
	dir  string // as given to Open, cleaned
	real string // dir with symlinks evaluated
	root *os.Root

	owner atomic.Pointer[owner] // set by Chown; nil means the process's

	closeOnce sync.Once
	closeErr  error
}

type owner struct{ uid, gid int }

var _ execbox.Files = (*Workspace)(nil)

// Open opens the workspace at dir, an existing directory given by its
// absolute path. The directory stays open (and usable) until Close, even if
// it is renamed. A relative path is ErrInvalidArgument naming the field
// "workspace", a missing one ErrNotFound.
func Open(dir string) (*Workspace, error) {
	switch {
	case strings.IndexByte(dir, 0) >= 0:
		return nil, execbox.Invalid("workspace", "contains a NUL byte")
	case !filepath.IsAbs(dir):
		return nil, execbox.Invalid("workspace", "%q is not an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	root, err := os.OpenRoot(dir)
	if err != nil {
		if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
			err = &fs.PathError{Op: "open", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil, wrap("open workspace", dir, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		root.Close()
		return nil, wrap("open workspace", dir, err)
	}
	learnEscape(root)
	return &Workspace{dir: dir, real: real, root: root}, nil
}

// Dir returns the workspace's absolute path, as given to Open.
func (w *Workspace) Dir() string { return w.dir }

// Files returns w as an execbox.Files.
func (w *Workspace) Files() execbox.Files { return w }

// Close releases the directory. Operations in progress finish; later ones
// fail with execbox.ErrClosed. Close is idempotent. It removes nothing.
func (w *Workspace) Close() error {
	w.closeOnce.Do(func() { w.closeErr = w.root.Close() })
	return w.closeErr
}

// Resolve checks that p names a path inside the workspace and returns it
// relative to the workspace, cleaned ("." for the workspace itself). p is
// relative to the workspace or absolute under Dir (or under Dir with its
// symlinks evaluated); empty means ".". The check is lexical: a ".." that
// leaves the workspace or an absolute path elsewhere is a *FieldError of
// kind ErrPermission, a NUL byte one of kind ErrInvalidArgument, both
// naming field. Symlinks are checked when the path is used, by os.Root.
func (w *Workspace) Resolve(field, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", execbox.Invalid(field, "contains a NUL byte")
	}
	if p == "" {
		return ".", nil
	}
	c := filepath.Clean(p)
	if filepath.IsAbs(c) {
		for _, base := range []string{w.dir, w.real} {
			if rel, ok := under(base, c); ok {
				return rel, nil
			}
		}
		return "", &execbox.FieldError{Field: field, Problem: fmt.Sprintf("%q is outside the workspace", p), Kind: execbox.ErrPermission}
	}
	if c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator)) {
		return "", &execbox.FieldError{Field: field, Problem: fmt.Sprintf("%q leaves the workspace", p), Kind: execbox.ErrPermission}
	}
	return c, nil
}

// under returns p relative to base if p is base or below it. Both are
// clean absolute paths.
func under(base, p string) (string, bool) {
	if p == base {
		return ".", true
	}
	prefix := base
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	if rel, ok := strings.CutPrefix(p, prefix); ok {
		return rel, true
	}
	return "", false
}

// CheckDir checks that p (see Resolve) is an existing directory inside the
// workspace, following symlinks only inside it, and returns its absolute
// path on this machine, to use as a process's working directory. Problems
// are *FieldErrors naming field: ErrPermission for a path or symlink
// leading out, ErrNotFound for a missing directory, ErrInvalidArgument for
// a file.
//
// The kernel resolves the returned path again when the process starts, so
// this is a check of the request, not a confinement of the process: a
// command that swaps the directory for a symlink afterwards is contained by
// the runtime's isolation, not by CheckDir.
func (w *Workspace) CheckDir(field, p string) (string, error) {
	rel, err := w.Resolve(field, p)
	if err != nil {
		return "", err
	}
	fi, err := w.root.Stat(rel)
	if err != nil {
		switch kind := kindOf(err); kind {
		case execbox.ErrNotFound:
			return "", &execbox.FieldError{Field: field, Problem: fmt.Sprintf("%q does not exist", p), Kind: kind}
		case execbox.ErrPermission, execbox.ErrInvalidArgument:
			return "", &execbox.FieldError{Field: field, Problem: fmt.Sprintf("%q: %s", p, describe(err)), Kind: kind}
		}
		return "", wrap("chdir", rel, err)
	}
	if !fi.IsDir() {
		return "", execbox.Invalid(field, "%q is not a directory", p)
	}
	return filepath.Join(w.dir, rel), nil
}

// Chown gives the whole workspace to uid and gid, as Lchown does (symlinks
// themselves, never their targets), and makes them the owner of everything
// created through w from now on. Use it before running commands as another
// user; it needs the privilege to chown. -1 leaves an id unchanged.
func (w *Workspace) Chown(uid, gid int) error {
	w.owner.Store(&owner{uid, gid})
	if err := w.root.Lchown(".", uid, gid); err != nil {
		return wrap("chown", ".", err)
	}
	return walkDirs(w.root, ".", func(r *os.Root, name, rel string, fi fs.FileInfo) error {
		return wrap("chown", rel, r.Lchown(name, uid, gid))
	})
}

// chownNew gives name, just created in r, to the workspace owner if there
// is one.
func (w *Workspace) chownNew(r *os.Root, name string) error {
	if o := w.owner.Load(); o != nil {
		return r.Lchown(name, o.uid, o.gid)
	}
	return nil
}

// fchownNew gives f, just created, to the workspace owner if there is one.
func (w *Workspace) fchownNew(f *os.File) error {
	if o := w.owner.Load(); o != nil {
		return f.Chown(o.uid, o.gid)
	}
	return nil
}

// setMtime sets the modification time of f, open as name in r: through
// the descriptor where the system allows it, else by name.
func setMtime(r *os.Root, f *os.File, name string, mtime time.Time) error {
	err := dirfd.SetMtime(f, mtime)
	if errors.Is(err, errors.ErrUnsupported) {
		return r.Chtimes(name, time.Time{}, mtime)
	}
	return err
}

// walkDirs calls fn for every entry below the directory r, depth first, in
// name order; rel is r's path relative to the workspace. fn gets the root
// of the entry's directory, its name there, its path relative to the
// workspace, and its Lstat. Directories are opened through the root of
// their parent and checked to be the file Lstat described, so a directory
// replaced by a symlink during the walk is skipped, never followed. An
// entry that disappears during the walk is skipped.
func walkDirs(r *os.Root, rel string, fn func(r *os.Root, name, rel string, fi fs.FileInfo) error) error {
	names, err := readNames(r)
	if err != nil {
		return wrap("read directory", rel, err)
	}
	for _, name := range names {
		erel := filepath.Join(rel, name)
		fi, err := r.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return wrap("stat", erel, err)
		}
		if err := fn(r, name, erel, fi); err != nil {
			return err
		}
		if !fi.IsDir() {
			continue
		}
		sub, err := openDir(r, name, fi)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errChanged) {
			continue
		}
		if err != nil {
			return wrap("open directory", erel, err)
		}
		err = walkDirs(sub, erel, fn)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// openRoot is r.OpenRoot(name), failing with ENOTDIR (which os.Root does
// not use for this case) when name is not a directory.
func openRoot(r *os.Root, name string) (*os.Root, error) {
	sub, err := r.OpenRoot(name)
	if err != nil {
		if fi, serr := r.Stat(name); serr == nil && !fi.IsDir() {
			err = &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
		}
		return nil, err
	}
	return sub, nil
}

// openDir opens the directory name of r as a root, and checks that it is
// the file fi (from Lstat) describes: errChanged if it is not.
func openDir(r *os.Root, name string, fi fs.FileInfo) (*os.Root, error) {
	sub, err := openRoot(r, name)
	if err != nil {
		return nil, err
	}
	sfi, err := sub.Stat(".")
	if err != nil {
		sub.Close()
		return nil, err
	}
	if !os.SameFile(fi, sfi) {
		sub.Close()
		return nil, errChanged
	}
	return sub, nil
}

// readNames returns the names in the directory r, sorted.
func readNames(r *os.Root) ([]string, error) {
	d, err := r.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// Snapshot writes the whole workspace to wr as a tar stream: Download of
// ".". Restore reads it back.
func (w *Workspace) Snapshot(ctx context.Context, wr io.Writer) error {
	return w.Download(ctx, ".", wr)
}

// Restore unpacks a tar stream (from Snapshot or any tar) into the
// workspace: Upload into ".". Existing files are replaced by the archive's,
// others are left alone.
func (w *Workspace) Restore(ctx context.Context, r io.Reader) error {
	return w.Upload(ctx, ".", r)
}
