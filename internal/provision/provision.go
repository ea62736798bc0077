// Package provision prepares a new sandbox from its Spec: snapshot, assets,
// then setup commands. It works through the execbox.Sandbox interface only,
// so every runtime gets the same behaviour and the same errors.
package provision

import (
	"archive/tar"
	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/execbox/execbox"
)

// CheckAssets verifies that every Source asset exists on this host, so a
// typo fails before anything is created.
func CheckAssets(spec *execbox.Spec) error {
	for i, a := range spec.Assets {
		if a.Source == "" {
			continue
		}
		if _, err := os.Lstat(a.Source); err != nil {
			return execbox.Invalid(fmt.Sprintf("assets[%d].source", i), "%v", err)
		}
	}
	return nil
}

// Apply restores spec.Snapshot, copies spec.Assets and runs spec.Setup in
// sb, in that order. The caller closes sb when Apply fails.
func Apply(ctx context.Context, sb execbox.Sandbox, spec *execbox.Spec) error {
	if spec.Snapshot != nil {
		if err := sb.Files().Upload(ctx, ".", spec.Snapshot); err != nil {
			return fmt.Errorf("restore snapshot: %w", err)
		}
	}
	for i, a := range spec.Assets {
		if err := addAsset(ctx, sb.Files(), a); err != nil {
			return fmt.Errorf("assets[%d]: %w", i, err)
		}
	}
	for i, req := range spec.Setup {
		res, err := sb.Exec(ctx, req)
		if err != nil {
			return fmt.Errorf("setup[%d]: %w", i, err)
		}
		if !res.Success() {
			cmd := req.Command
			if req.Shell != "" {
				cmd = []string{cmp.Or(res.Shell, "sh"), "-c", req.Shell}
			}
			return &execbox.SetupError{Index: i, Result: res, Cmd: cmd}
		}
	}
	return nil
}

func addAsset(ctx context.Context, files execbox.Files, a execbox.Asset) error {
	if a.Source == "" {
		mode := fs.FileMode(a.Mode)
		if mode == 0 {
			mode = 0o644
		}
		return files.WriteFile(ctx, a.Path, a.Content, execbox.WriteOptions{Mode: mode, Parents: true})
	}
	// Stream the host tree as tar into the workspace; Upload confines it.
	pr, pw := io.Pipe()
	dir, name := path.Split(path.Clean(filepath.ToSlash(a.Path)))
	if dir == "" {
		dir = "."
	}
	go func() { pw.CloseWithError(tarHostPath(a.Source, name, pw)) }()
	err := files.Upload(ctx, dir, pr)
	pr.CloseWithError(err) // unblocks the writer if Upload stopped early
	return err
}

// tarHostPath writes src (a file or a tree) as a tar whose root entry is
// named root, symlinks kept as links. It runs on the host, as execbox's
// user (root), on a tree that a sandbox may be able to write (another
// sandbox's workspace): nothing is opened by a path that a symlink
// swapped in meanwhile could lead out of src. A tree is read through an
// os.Root (no resolution escapes it), a single file through one of its
// directory, and each header is built from the opened file, not from an
// earlier lstat.
func tarHostPath(src, root string, w io.Writer) error {
	tw := tar.NewWriter(w)
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		err = tarTree(src, root, tw)
	} else if fi.Mode().IsRegular() {
		err = tarOne(src, root, tw)
	} else if fi.Mode()&fs.ModeSymlink != 0 {
		err = tarEntry(tw, fi, root, src, os.Readlink)
	}
	if err != nil {
		return err
	}
	return tw.Close()
}

// tarOne writes the single file src under the name root.
func tarOne(src, root string, tw *tar.Writer) error {
	r, err := os.OpenRoot(filepath.Dir(src))
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := r.Open(filepath.Base(src))
	if err != nil {
		return err
	}
	defer f.Close()
	return tarFile(tw, f, root)
}

// tarTree writes the tree at src under the name root.
func tarTree(src, root string, tw *tar.Writer) error {
	r, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer r.Close()
	return fs.WalkDir(r.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := path.Join(root, p)
		switch {
		case d.Type().IsRegular():
			f, err := r.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return tarFile(tw, f, name)
		case d.IsDir() || d.Type()&fs.ModeSymlink != 0:
			fi, err := r.Lstat(p)
			if err != nil {
				return err
			}
			return tarEntry(tw, fi, name, p, r.Readlink)
		}
		return nil // sockets, devices, fifos are not assets
	})
}

// tarEntry writes the header of a directory or a symlink.
func tarEntry(tw *tar.Writer, fi fs.FileInfo, name, p string, readlink func(string) (string, error)) error {
	var link string
	if fi.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = readlink(p); err != nil {
			return err
		}
	} else if !fi.IsDir() {
		return nil
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	hdr.Name = name
	if fi.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	return tw.WriteHeader(hdr)
}

// tarFile writes the open file f, which must be a regular file, under
// name: its header from f itself, and exactly the size it had then.
func tarFile(tw *tar.Writer, f *os.File, name string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	hdr, err := tar.FileInfoHeader(fi, "")
	if err != nil {
		return err
	}
	hdr.Name = name
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, fi.Size())
	return err
}
