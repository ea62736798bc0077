// Package provision prepares a new sandbox from its Spec: snapshot, assets,
// then setup commands. It works through the execbox.Sandbox interface only,
// so every runtime gets the same behaviour and the same errors.
package provision

import (
	"archive/tar"
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
				cmd = []string{"sh", "-c", req.Shell}
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
// named root, symlinks kept as links.
func tarHostPath(src, root string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.Walk(src, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		var link string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		if !fi.Mode().IsRegular() && !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
			return nil // sockets, devices, fifos are not assets
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = path.Join(root, filepath.ToSlash(rel))
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
