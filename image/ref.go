//go:build linux

package image

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/execbox/execbox"
)

// source is a parsed reference: a registry's, or a local path.
type source struct {
	key    string         // the reference as resolved: Image.Ref, the cache's key
	remote name.Reference // nil for a local path
	path   string         // absolute path of an OCI layout or a tarball
	tag    string         // of a local path: org.opencontainers.image.ref.name, or tarball tag
	digest string         // of a local path: "sha256:..." of a manifest
}

// isLocal reports whether ref names a local path: it starts with "/",
// "./" or "../" (or is "." or ".."). Whether something of that name
// exists on disk does not matter: "python" stays Docker Hub's python even
// in a directory holding a "python" file, and the same reference means
// the same image from whatever directory it is read.
func isLocal(ref string) bool {
	return ref == "." || ref == ".." || strings.HasPrefix(ref, "/") ||
		strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "../")
}

// parseRef parses ref, without touching the network.
func parseRef(ref string) (source, error) {
	if ref == "" || strings.IndexByte(ref, 0) >= 0 || strings.TrimSpace(ref) != ref {
		return source{}, execbox.Invalid("image", "reference %q is empty or has spaces or NUL bytes", ref)
	}
	if isLocal(ref) {
		return parseLocal(ref)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return source{}, execbox.Invalid("image", "reference %q: %v", ref, err)
	}
	return source{key: r.Name(), remote: r}, nil
}

// parseLocal parses a local path, with an optional "@sha256:..." or
// ":tag" suffix (after the first prefix that exists) selecting one manifest of a layout (by its
// org.opencontainers.image.ref.name annotation) or one image of a
// tarball ("img.tar:busybox:latest"). A path that exists as a whole wins over a suffix.
func parseLocal(ref string) (source, error) {
	abs, err := filepath.Abs(ref)
	if err != nil {
		return source{}, execbox.Invalid("image", "reference %q: %v", ref, err)
	}
	src := source{key: abs, path: abs}
	if _, err := os.Stat(abs); err == nil {
		return src, nil
	}
	if p, d, ok := strings.Cut(abs, "@"); ok {
		if _, err := name.NewDigest("x@" + d); err != nil {
			return source{}, execbox.Invalid("image", "reference %q: bad digest: %v", ref, err)
		}
		src.path, src.digest = p, d
		return src, nil
	}
	// The path is the shortest prefix before a ":" that exists.
	for i := range len(abs) {
		if abs[i] == ':' {
			if _, err := os.Stat(abs[:i]); err == nil {
				src.path, src.tag = abs[:i], abs[i+1:]
				return src, nil
			}
		}
	}
	slash := strings.LastIndexByte(abs, '/')
	if dir, tag, ok := strings.Cut(abs[slash:], ":"); ok {
		src.path, src.tag = abs[:slash]+dir, tag
	}
	return src, nil
}
