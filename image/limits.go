//go:build linux

package image

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/execbox/execbox"
)

// Bounds of an image's metadata, which is read into memory (layers are
// streamed to disk). A pull is started by whoever names a reference (a
// tenant's create, on a server), from a registry someone else runs: a
// manifest or configuration declared at gigabytes would otherwise be read
// whole into the server's memory, for every pull at once.
const (
	// MaxMetadataSize bounds each manifest, index and configuration,
	// as Docker Distribution bounds manifests: real ones are a few KiB,
	// configurations with a long history some hundreds.
	MaxMetadataSize = 4 << 20
	// MaxLayers bounds the layers of an image. Docker's overlay2 cannot
	// run an image of more than 125 either.
	MaxLayers = 128
)

// tooLarge is the error of a piece of metadata (what: "manifest",
// "configuration") of size bytes, over MaxMetadataSize. It matches
// execbox.ErrResourceExhausted (a size limit, as a file larger than a
// read's limit) and names the field "image".
func tooLarge(what string, size int64) error {
	return &execbox.FieldError{Field: "image", Kind: execbox.ErrResourceExhausted, Problem: fmt.Sprintf(
		"%s is %d bytes, more than the %d this store reads (image.MaxMetadataSize)", what, size, MaxMetadataSize)}
}

// tooLong is the error of a piece of metadata that did not say its size
// and turned out longer than MaxMetadataSize.
func tooLong(what string) error {
	return &execbox.FieldError{Field: "image", Kind: execbox.ErrResourceExhausted, Problem: fmt.Sprintf(
		"%s is more than the %d bytes this store reads (image.MaxMetadataSize)", what, MaxMetadataSize)}
}

// checkManifest refuses a manifest of more than MaxLayers layers, or
// whose configuration is declared larger than MaxMetadataSize: both
// before anything of them is read.
func checkManifest(m *v1.Manifest) error {
	if n := len(m.Layers); n > MaxLayers {
		return &execbox.FieldError{Field: "image", Kind: execbox.ErrResourceExhausted, Problem: fmt.Sprintf(
			"the image has %d layers, more than the %d this store unpacks (image.MaxLayers)", n, MaxLayers)}
	}
	if m.Config.Size > MaxMetadataSize || m.Config.Size < 0 {
		return tooLarge("its configuration "+m.Config.Digest.String(), m.Config.Size)
	}
	return nil
}

// limitTransport bounds what a registry's answers may hold in memory:
// every answer but a blob's content (a manifest, an index, an error, a
// token, a redirect's body) is refused when its Content-Length is over
// MaxMetadataSize, and cut off with an error past it when it has none.
// Blobs are bounded by their declared size, which ggcr reads through a
// LimitReader and checks; a configuration's is checked by checkManifest
// before it is read.
type limitTransport struct{ base http.RoundTripper }

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || isBlobContent(req, resp) {
		return resp, err
	}
	what := "an answer of the registry (" + req.URL.Path + ")"
	if strings.Contains(req.URL.Path, "/manifests/") {
		what = "the manifest " + req.URL.Path
	}
	if resp.ContentLength > MaxMetadataSize {
		resp.Body.Close()
		return nil, tooLarge(what, resp.ContentLength)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: MaxMetadataSize, what: what}
	return resp, nil
}

// isBlobContent reports whether resp is a blob's content: a successful
// GET of /v2/NAME/blobs/DIGEST, or of where such a GET was redirected
// (a registry's storage or CDN).
func isBlobContent(req *http.Request, resp *http.Response) bool {
	if resp.StatusCode < 200 || resp.StatusCode > 299 || req.Method != http.MethodGet {
		return false
	}
	first := req
	for first.Response != nil && first.Response.Request != nil {
		first = first.Response.Request
	}
	return strings.HasPrefix(first.URL.Path, "/v2/") && strings.Contains(first.URL.Path, "/blobs/")
}

// limitedBody is an answer's body that fails once more than left bytes
// were read from it.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
	what string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, tooLong(b.what)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, tooLong(b.what)
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// checkFile refuses the local file name (a layout's index or blob) when
// it is larger than MaxMetadataSize, before it is read.
func checkFile(what, name string) error {
	fi, err := os.Stat(name)
	if err != nil {
		return err
	}
	if fi.Size() > MaxMetadataSize {
		return tooLarge(what, fi.Size())
	}
	return nil
}
