//go:build linux

package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/netguard"
)

// refNameAnnotation names a manifest of an OCI layout ("DIR:tag").
const refNameAnnotation = "org.opencontainers.image.ref.name"

// resolve finds the image src names for the store's platform: its
// manifest is read again (from the registry, the layout or the tarball),
// its layers are not yet. digest is the manifest's, when known.
func (s *Store) resolve(ctx context.Context, src source) (img v1.Image, digest string, err error) {
	switch {
	case src.remote != nil:
		img, err = remote.Image(src.remote, s.remoteOptions(ctx, src.remote.Context().Registry)...)
	case isLayout(src.path):
		img, digest, err = s.fromLayout(src)
		return img, digest, err
	default:
		img, err = fromTarball(src)
		return img, "", err
	}
	if err != nil {
		return nil, "", err
	}
	d, err := img.Digest()
	if err != nil {
		return nil, "", err
	}
	return img, d.String(), nil
}

// remoteOptions are ggcr's options to speak to the registry reg for ctx:
// through limitTransport, and for a tenant's pull, tenantTransport and
// no credentials: the server's own (its keychain) are not the tenant's
// to send, to a registry the tenant names, or to use for an image the
// tenant could not pull itself.
func (s *Store) remoteOptions(ctx context.Context, reg name.Registry) []remote.Option {
	base, keychain := remote.DefaultTransport, s.keychain
	if netguard.IsTenant(ctx) {
		base, keychain = s.tenantTransport(reg), authn.NewMultiKeychain()
	}
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(keychain),
		remote.WithPlatform(s.platform),
		remote.WithUserAgent("execbox"),
		remote.WithTransport(limitTransport{base}),
	}
}

// isLayout reports whether dir is an OCI image layout.
func isLayout(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "oci-layout"))
	return err == nil && fi.Mode().IsRegular()
}

// fromLayout picks the image of an OCI layout: the manifest named by
// digest or tag if any, else the one for the platform.
func (s *Store) fromLayout(src source) (v1.Image, string, error) {
	if err := checkFile("the layout's index.json", filepath.Join(src.path, "index.json")); err != nil {
		return nil, "", err
	}
	idx, err := layout.ImageIndexFromPath(src.path)
	if err != nil {
		return nil, "", err
	}
	img, dg, err := s.pick(idx, layout.Path(src.path), func(d v1.Descriptor) bool {
		return (src.digest == "" || d.Digest.String() == src.digest) &&
			(src.tag == "" || d.Annotations[refNameAnnotation] == src.tag)
	})
	if errors.Is(err, execbox.ErrNotFound) && (src.tag != "" || src.digest != "") {
		which := "tag " + src.tag
		if src.digest != "" {
			which = "digest " + src.digest
		}
		err = fmt.Errorf("%w: no manifest with %s for %s in the layout", execbox.ErrNotFound, which, s.platform)
	}
	return img, dg, err
}

// pick returns the image of idx, an index of the layout dir, that want
// accepts and whose platform is the store's, looking into nested indexes
// (whose own entries are all wanted). An entry without a platform is
// taken for the store's. Every manifest, index and configuration is
// checked against MaxMetadataSize (declared and on disk) before it is
// read: ggcr's layout reads them whole.
func (s *Store) pick(idx v1.ImageIndex, dir layout.Path, want func(v1.Descriptor) bool) (v1.Image, string, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, "", err
	}
	for _, d := range im.Manifests {
		if !want(d) || d.Platform != nil && !d.Platform.Satisfies(s.platform) {
			continue
		}
		switch {
		case d.MediaType.IsImage():
			img, err := layoutImage(idx, dir, d)
			return img, d.Digest.String(), err
		case d.MediaType.IsIndex():
			if err := checkBlob(dir, "the index", d); err != nil {
				return nil, "", err
			}
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, "", err
			}
			img, dg, err := s.pick(child, dir, func(v1.Descriptor) bool { return true })
			if err == nil {
				return img, dg, nil
			}
		}
	}
	return nil, "", fmt.Errorf("%w: no manifest for %s", execbox.ErrNotFound, s.platform)
}

// layoutImage is the image d of the index idx of the layout dir, its
// manifest and configuration checked (checkBlob, checkManifest) before
// they are read.
func layoutImage(idx v1.ImageIndex, dir layout.Path, d v1.Descriptor) (v1.Image, error) {
	if err := checkBlob(dir, "the manifest", d); err != nil {
		return nil, err
	}
	img, err := idx.Image(d.Digest)
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if err := checkManifest(m); err != nil {
		return nil, err
	}
	return img, checkBlob(dir, "the configuration", m.Config)
}

// checkBlob refuses the blob d of the layout dir when it is declared, or
// is on disk, larger than MaxMetadataSize.
func checkBlob(dir layout.Path, what string, d v1.Descriptor) error {
	what += " " + d.Digest.String()
	if d.Size > MaxMetadataSize || d.Size < 0 {
		return tooLarge(what, d.Size)
	}
	if d.Digest.Algorithm == "" || strings.ContainsAny(d.Digest.Algorithm+d.Digest.Hex, "/.") {
		return execbox.Invalid("image", "%s is not a digest", what)
	}
	return checkFile(what, filepath.Join(string(dir), "blobs", d.Digest.Algorithm, d.Digest.Hex))
}

// fromTarball reads a `docker save` tarball; src.tag picks one image of
// several.
func fromTarball(src source) (v1.Image, error) {
	var tag *name.Tag
	if src.tag != "" {
		t, err := name.NewTag(src.tag)
		if err != nil {
			return nil, execbox.Invalid("image", "tarball tag %q: %v", src.tag, err)
		}
		tag = &t
	}
	if fi, err := os.Stat(src.path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, execbox.Invalid("image", "%s is neither an OCI layout (no oci-layout file) nor a tarball", src.path)
	}
	if err := checkTarball(src.path); err != nil {
		return nil, err
	}
	return tarball.ImageFromPath(src.path, tag)
}

// checkTarball refuses a `docker save` tarball whose manifest.json, or a
// configuration it names, is larger than MaxMetadataSize: ggcr reads
// them whole. Only the tar's headers are read (its entries are skipped
// by seeking), and manifest.json through the limit. A tarball that does
// not parse is left for ggcr to explain.
func checkTarball(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	sizes := map[string]int64{}
	var manifest []byte
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		entry := path.Clean(hdr.Name)
		sizes[entry] = hdr.Size
		if entry != "manifest.json" {
			continue
		}
		if hdr.Size > MaxMetadataSize {
			return tooLarge("the tarball's manifest.json", hdr.Size)
		}
		if manifest, err = io.ReadAll(io.LimitReader(tr, MaxMetadataSize)); err != nil {
			return nil // a damaged tar: ggcr explains
		}
	}
	var m []struct{ Config string }
	if json.Unmarshal(manifest, &m) != nil {
		return nil
	}
	for _, e := range m {
		if n := sizes[path.Clean(e.Config)]; n > MaxMetadataSize {
			return tooLarge("the configuration "+e.Config, n)
		}
	}
	return nil
}

// checkPlatform refuses an image built for another platform than the
// store's (a registry may serve a single-platform manifest whatever the
// platform asked); one that does not say is accepted.
func (s *Store) checkPlatform(cf *v1.ConfigFile) error {
	if cf.OS == "" || cf.Architecture == "" {
		return nil
	}
	p := cf.Platform()
	if p.Satisfies(s.platform) {
		return nil
	}
	return fmt.Errorf("%w: image is for %s, not %s", execbox.ErrUnsupported, p, s.platform)
}
