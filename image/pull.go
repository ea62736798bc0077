//go:build linux

package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/ctxio"
	"github.com/execbox/execbox/internal/netguard"
)

// Pull resolves ref again (a registry round trip for a registry's
// reference; reading the layout or tarball again for a local one), and
// unpacks the image's root unless a root with the same layers is already
// there. Concurrent pulls of the same reference in one process do the
// work once; across processes, a lock per root keeps two from unpacking
// the same one (the second waits and uses the first's).
//
// A pull cut off (ctx cancelled, connection dropped, a layer that does not
// match its digest) leaves nothing in the store. Errors name the
// reference and match execbox.ErrNotFound (no such repository, tag,
// manifest or path), ErrPermission (credentials refused or missing),
// ErrUnavailable (registry unreachable), ErrUnsupported (no manifest for
// the platform) or ErrInvalidArgument (a bad reference or image).
func (s *Store) Pull(ctx context.Context, ref string) (*Image, error) {
	src, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	return s.pullSource(ctx, src)
}

// A tenant's pull (netguard.IsTenant) is guarded (tenantTransport) and
// its errors tell no registry's answer (tenantError); it never shares
// its work, or its result, with another's pull of the same reference.
func (s *Store) pullSource(ctx context.Context, src source) (*Image, error) {
	key, tenant := src.key, netguard.IsTenant(ctx)
	if tenant {
		key = "tenant\x00" + key
	}
	img, err := s.pulls.do(ctx, key, func() (*Image, error) {
		img, err := s.pull(ctx, src)
		return img, refError(src.key, src.remote != nil, err)
	})
	if tenant {
		err = tenantError(src.key, err)
	}
	if err == nil && s.maxSize > 0 {
		if _, perr := s.prune(ctx, s.maxSize, img.ChainID); perr != nil {
			s.log.Warn("prune after pull", "error", perr)
		}
	}
	return img, err
}

// Ensure returns the cached image of ref without any network, or pulls
// it. This is what creating a sandbox calls: when cached, it reads one
// small file. A cached tag is not checked for a newer image: Pull does.
func (s *Store) Ensure(ctx context.Context, ref string) (*Image, error) {
	src, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	if r, err := s.readRecord(src.key); err == nil {
		return s.image(r), nil
	}
	return s.pullSource(ctx, src)
}

// Get returns the cached image of ref; an error matching
// execbox.ErrNotFound if there is none.
func (s *Store) Get(ref string) (*Image, error) {
	src, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	r, err := s.readRecord(src.key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFound(src.key, "not in the store (pull it)")
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", src.key, err)
	}
	return s.image(r), nil
}

// pull resolves src and installs its image.
func (s *Store) pull(ctx context.Context, src source) (*Image, error) {
	start := now()
	vimg, digest, err := s.resolve(ctx, src)
	if err != nil {
		return nil, err
	}
	id, cf, err := readConfig(vimg)
	if err != nil {
		return nil, err
	}
	if err := s.checkPlatform(cf); err != nil {
		return nil, err
	}
	chain, err := chainID(cf.RootFS.DiffIDs)
	if err != nil {
		return nil, err
	}
	rec := &record{Ref: src.key, ID: id, Digest: digest, ChainID: chain, Config: configOf(cf)}
	if err := s.install(ctx, rec, vimg, cf.RootFS.DiffIDs); err != nil {
		return nil, err
	}
	s.log.Info("pulled", "ref", src.key, "id", id, "chain_id", chain, "size", rec.Size, "duration", now().Sub(start))
	return s.image(rec), nil
}

// readConfig returns the image's ID and configuration, checked against
// the digest its manifest gives. The manifest is checked first
// (checkManifest): a configuration declared too large is never read.
func readConfig(img v1.Image) (string, *v1.ConfigFile, error) {
	m, err := img.Manifest()
	if err != nil {
		return "", nil, err
	}
	if err := checkManifest(m); err != nil {
		return "", nil, err
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(raw)
	id := "sha256:" + hex.EncodeToString(sum[:])
	if m.Config.Digest.String() != id {
		return "", nil, execbox.Invalid("image", "configuration is %s, its manifest says %s", id, m.Config.Digest)
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return "", nil, execbox.Invalid("image", "configuration: %v", err)
	}
	if len(cf.RootFS.DiffIDs) != len(m.Layers) {
		return "", nil, execbox.Invalid("image", "%d layers but %d diff IDs", len(m.Layers), len(cf.RootFS.DiffIDs))
	}
	return id, cf, nil
}

// chainID is the OCI chain ID of the layers ids, as hex: the ID of the
// first, then sha256(previous chain ID + " " + diff ID) for each next.
// No layers at all is the sha256 of nothing.
func chainID(ids []v1.Hash) (string, error) {
	chain := "sha256:" + hex.EncodeToString(sha256.New().Sum(nil))
	for i, d := range ids {
		if d.Algorithm != "sha256" || !isHex(d.Hex) {
			return "", execbox.Invalid("image", "diff ID %q is not a sha256", d)
		}
		if i == 0 {
			chain = d.String()
			continue
		}
		sum := sha256.Sum256([]byte(chain + " " + d.String()))
		chain = "sha256:" + hex.EncodeToString(sum[:])
	}
	return strings.TrimPrefix(chain, "sha256:"), nil
}

// install makes sure the root of rec.ChainID is in the store (unpacking
// it from img if not) and records rec, all under the root's lock, so
// that no Remove or Prune comes in between.
func (s *Store) install(ctx context.Context, rec *record, img v1.Image, diffIDs []v1.Hash) error {
	unlock, err := lockCtx(ctx, s.path(locksDir, rec.ChainID+".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	size, err := s.rootSize(rec.ChainID)
	if errors.Is(err, fs.ErrNotExist) {
		q := s.newQuota(ctx, rec.ChainID)
		defer q.release() // once the record is written: then the root counts
		size, err = s.unpack(ctx, rec.ChainID, q, img, diffIDs)
	}
	if err != nil {
		return err
	}
	rec.Size = size
	touch(filepath.Join(s.rootDir(rec.ChainID), "lock"))
	return s.writeRecord(rec)
}

// rootSize is the size of the root chain; fs.ErrNotExist if it is not
// (completely) there.
func (s *Store) rootSize(chain string) (int64, error) {
	if _, err := os.Lstat(filepath.Join(s.rootDir(chain), "rootfs")); err != nil {
		return 0, err
	}
	b, err := os.ReadFile(filepath.Join(s.rootDir(chain), "size"))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(b), 10, 64)
}

// unpack applies the layers of img, each checked against its diff ID,
// into a temporary directory, and renames the result into place: only a
// complete root is ever in roots/. Returns its size.
func (s *Store) unpack(ctx context.Context, chain string, q *quota, img v1.Image, diffIDs []v1.Hash) (int64, error) {
	tmp, err := os.MkdirTemp(s.path(tmpDir), chain+"-*")
	if err != nil {
		return 0, err
	}
	defer removeAll(tmp)
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return 0, err
	}
	if err := applyLayers(ctx, rootfs, q, img, diffIDs); err != nil {
		return 0, err
	}
	s.unpacked.Add(1)
	size, err := treeSize(rootfs)
	if err != nil {
		return 0, err
	}
	dir := s.rootDir(chain)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	if err := touch(filepath.Join(dir, "lock")); err != nil {
		return 0, err
	}
	if err := writeAtomic(filepath.Join(dir, "size"), []byte(strconv.FormatInt(size, 10))); err != nil {
		return 0, err
	}
	return size, os.Rename(rootfs, filepath.Join(dir, "rootfs"))
}

// applyLayers applies the layers of img in order into rootfs, within
// the quota q (applier.charge; nil: no bound).
func applyLayers(ctx context.Context, rootfs string, q *quota, img v1.Image, diffIDs []v1.Hash) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(layers) != len(diffIDs) {
		return execbox.Invalid("image", "%d layers but %d diff IDs", len(layers), len(diffIDs))
	}
	a, err := newApplier(rootfs)
	if err != nil {
		return err
	}
	defer a.Close()
	a.quota = q
	if err := a.charge(0); err != nil { // the root directory itself
		return err
	}
	for i, l := range layers {
		if err := applyVerified(ctx, a, l, diffIDs[i]); err != nil {
			return fmt.Errorf("layer %d (%s): %w", i, diffIDs[i], err)
		}
	}
	return a.finish()
}

// applyVerified applies the layer l, reading it to its end to check that
// its uncompressed content is diffID (the configuration's, itself checked
// against the manifest). ggcr checks the compressed digest of a
// registry's layer as well; this check covers every source, and what was
// applied from a bad layer is thrown away with the temporary directory.
func applyVerified(ctx context.Context, a *applier, l v1.Layer, diffID v1.Hash) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	r := io.TeeReader(ctxio.Reader(ctx, rc), h)
	if err := a.applyLayer(ctx, r); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != diffID.Hex {
		return execbox.Invalid("image", "layer content is sha256:%s, not its diff ID", got)
	}
	return nil
}

// treeSize adds up what the entries under dir take on disk (diskSize), each hard
// linked file once.
func treeSize(dir string) (int64, error) {
	var size int64
	seen := map[[2]uint64]bool{}
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if k, multi := inode(fi); multi {
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		size += diskSize(fi)
		return nil
	})
	return size, err
}

// diskSize is what the entry fi takes on disk: its blocks (an image's
// directories, symlinks and xattrs take disk too, and a sparse file
// less than its size), and never less than an inode's worth.
func diskSize(fi fs.FileInfo) int64 {
	const inodeSize = 256
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return max(fi.Size(), inodeSize)
	}
	return max(st.Blocks*512, inodeSize)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
