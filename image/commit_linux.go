package image

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"github.com/execbox/execbox"
)

// Changes is what a sandbox changed over an image's root, as overlayfs
// keeps it: its upper directory.
type Changes struct {
	// Upper is the overlay's upper directory (a path; the sandbox runtime
	// passes /proc/self/fd/N/upper of a mount only it holds). It is read
	// through an os.Root: a sandbox that swaps a directory for a symlink
	// while the commit reads leads it nowhere outside Upper.
	Upper string
	// IDBase is the host uid and gid of the image's id 0 in Upper: host
	// id IDBase+n is the image's n. Ids outside [IDBase, IDBase+65536)
	// become 65534 (nobody).
	IDBase uint32
}

// Commit makes a new image of base's layers and one more, ch as an OCI
// layer (overlayfs's whiteouts and opaque directories turned into the
// layer format's), with base's configuration, and writes it to dest: a
// registry reference (pushed, with the store's credentials), or a local
// path ("/", "./" or "../") of an OCI image layout directory, created if
// missing, to which the image is added (tagged with dest's ":tag" if it
// has one: "./env:py"). The new image can then be the Spec.Image of
// other sandboxes. base's layers are read from where base came from, by
// digest: a base that is gone or changed there fails the commit.
func (s *Store) Commit(ctx context.Context, base *Image, ch Changes, dest string) (execbox.CommittedImage, error) {
	src, err := parseRef(base.Ref)
	if err != nil {
		return execbox.CommittedImage{}, err
	}
	if src.remote != nil && base.Digest != "" {
		if src.remote, err = name.NewDigest(src.remote.Context().Name() + "@" + base.Digest); err != nil {
			return execbox.CommittedImage{}, err
		}
	}
	baseImg, _, err := s.resolve(ctx, src)
	if err != nil {
		return execbox.CommittedImage{}, refError(base.Ref, src.remote != nil, err)
	}
	if id, err := baseImg.ConfigName(); err != nil || id.String() != base.ID {
		return execbox.CommittedImage{}, fmt.Errorf("image %s: changed at its source since it was pulled (configuration %v, was %s): %w", base.Ref, id, base.ID, execbox.ErrNotFound)
	}
	// The layer goes to a file (0600, removed at the end), never whole
	// in memory: it is up to the sandbox's root size.
	f, err := os.CreateTemp("", "execbox-commit-*.tar")
	if err != nil {
		return execbox.CommittedImage{}, err
	}
	defer os.Remove(f.Name())
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = writeChanges(ctx, bw, ch); err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return execbox.CommittedImage{}, err
	}
	l, err := tarball.LayerFromFile(f.Name())
	if err != nil {
		return execbox.CommittedImage{}, err
	}
	img, err := mutate.Append(baseImg, mutate.Addendum{Layer: l, History: v1.History{
		Created: v1.Time{Time: time.Now().UTC()}, CreatedBy: "execbox commit", Comment: "changes of a sandbox over " + base.Ref,
	}})
	if err != nil {
		return execbox.CommittedImage{}, err
	}
	ref, err := s.write(ctx, img, dest)
	if err != nil {
		return execbox.CommittedImage{}, err
	}
	id, err := img.ConfigName()
	if err != nil {
		return execbox.CommittedImage{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return execbox.CommittedImage{}, err
	}
	return execbox.CommittedImage{Ref: ref, ID: id.String(), Digest: d.String()}, nil
}

// write puts img at dest (see Commit) and returns dest as resolved.
func (s *Store) write(ctx context.Context, img v1.Image, dest string) (string, error) {
	if !isLocal(dest) {
		r, err := name.ParseReference(dest)
		if err != nil {
			return "", execbox.Invalid("dest", "reference %q: %v", dest, err)
		}
		if err := remote.Write(r, img, s.remoteOptions(ctx, r.Context().Registry)...); err != nil {
			return "", refError(dest, true, err)
		}
		return r.Name(), nil
	}
	dir, tag := dest, ""
	if i := strings.LastIndexByte(dest, ':'); i > strings.LastIndexByte(dest, '/') {
		dir, tag = dest[:i], dest[i+1:]
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return "", fmt.Errorf("dest %s: %w", dir, err)
		}
	}
	var opts []layout.Option
	if tag != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{refNameAnnotation: tag}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		return "", fmt.Errorf("dest %s: %w", dir, err)
	}
	return dest, nil
}

// writeChanges writes ch as a layer's tar stream to w.
func writeChanges(ctx context.Context, w io.Writer, ch Changes) error {
	root, err := os.OpenRoot(ch.Upper)
	if err != nil {
		return err
	}
	defer root.Close()
	cw := &changeWriter{ctx: ctx, root: root, tw: tar.NewWriter(w), base: ch.IDBase, links: map[uint64]string{}}
	if err := cw.dir("."); err != nil {
		return err
	}
	return cw.tw.Close()
}

// changeWriter walks an overlay upper directory into a tar stream.
type changeWriter struct {
	ctx   context.Context
	root  *os.Root
	tw    *tar.Writer
	base  uint32
	links map[uint64]string // inode -> first name, for hard links
}

// dir writes the entries of the directory name (not name itself).
func (c *changeWriter) dir(name string) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	d, err := c.root.Open(name)
	if err != nil {
		return err
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range ents {
		if err := c.entry(path.Join(name, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// entry writes the entry name: a whiteout for overlayfs's (a character
// device 0/0), a directory (with an opaque marker if overlayfs made it
// opaque) and what is below it, a file, a link.
func (c *changeWriter) entry(name string) error {
	fi, err := c.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed meanwhile
	}
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no stat", name)
	}
	if fi.Mode()&fs.ModeCharDevice != 0 && st.Rdev == 0 {
		return c.tw.WriteHeader(&tar.Header{Name: path.Join(path.Dir(name), ".wh."+path.Base(name)), Typeflag: tar.TypeReg, Mode: 0o600, ModTime: fi.ModTime()})
	}
	hdr, err := tar.FileInfoHeader(fi, "")
	if err != nil {
		return nil // a socket or device: not in a layer (the unpacker skips them too)
	}
	hdr.Name, hdr.Uname, hdr.Gname = name, "", ""
	hdr.Format = tar.FormatPAX
	hdr.Uid, hdr.Gid = c.id(st.Uid), c.id(st.Gid)
	switch {
	case fi.IsDir():
		hdr.Name += "/"
		if err := c.tw.WriteHeader(hdr); err != nil {
			return err
		}
		if c.opaque(name) {
			if err := c.tw.WriteHeader(&tar.Header{Name: name + "/.wh..wh..opq", Typeflag: tar.TypeReg, Mode: 0o600, ModTime: fi.ModTime()}); err != nil {
				return err
			}
		}
		return c.dir(name)
	case fi.Mode()&fs.ModeSymlink != 0:
		if hdr.Linkname, err = c.root.Readlink(name); err != nil {
			return err
		}
		return c.tw.WriteHeader(hdr)
	case fi.Mode().IsRegular():
		return c.file(name, hdr, st)
	}
	return nil // fifos and devices: skipped, as the unpacker does
}

// file writes a regular file, or a hard link to one already written.
func (c *changeWriter) file(name string, hdr *tar.Header, st *syscall.Stat_t) error {
	if st.Nlink > 1 {
		if first, ok := c.links[st.Ino]; ok {
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			return c.tw.WriteHeader(hdr)
		}
		c.links[st.Ino] = name
	}
	f, err := c.root.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := c.tw.WriteHeader(hdr); err != nil {
		return err
	}
	// A file that grows meanwhile is cut at its size; one that shrinks
	// fails the commit (the tar would be short).
	if _, err := io.CopyN(c.tw, f, hdr.Size); err != nil {
		return fmt.Errorf("%s: %w (changed while being committed?)", name, err)
	}
	return nil
}

// opaque reports whether overlayfs marked the directory name opaque.
func (c *changeWriter) opaque(name string) bool {
	d, err := c.root.Open(name)
	if err != nil {
		return false
	}
	defer d.Close()
	var v [1]byte
	n, err := unix.Fgetxattr(int(d.Fd()), "trusted.overlay.opaque", v[:])
	return err == nil && n == 1 && v[0] == 'y'
}

// id maps a host uid or gid of the upper directory to the image's.
func (c *changeWriter) id(host uint32) int {
	if host < c.base || host-c.base >= 65536 {
		return 65534
	}
	return int(host - c.base)
}
