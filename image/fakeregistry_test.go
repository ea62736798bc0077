//go:build linux

package image

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// fakeRegistry is an HTTP server on loopback that speaks enough of the
// registry protocol (GET /v2/, manifests and blobs by path) to serve what
// no real registry would: manifests declaring gigabytes, answers without
// an end, redirects anywhere. Paths without a route get the registry's
// 404 answer.
type fakeRegistry struct {
	Host string // 127.0.0.1:PORT
	srv  *httptest.Server

	mu     sync.Mutex
	routes map[string]http.HandlerFunc
	hits   map[string]int
}

func startFakeRegistry(t testing.TB) *fakeRegistry {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startFakeRegistryOn(t, l)
}

// startFakeRegistryOn is startFakeRegistry serving on l.
func startFakeRegistryOn(t testing.TB, l net.Listener) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{routes: map[string]http.HandlerFunc{}, hits: map[string]int{}}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Listener.Close()
	f.srv.Listener = l
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	f.Host = strings.TrimPrefix(f.srv.URL, "http://")
	return f
}

func (f *fakeRegistry) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	h := f.routes[r.URL.Path]
	f.hits[r.URL.Path]++
	f.mu.Unlock()
	if h == nil && r.URL.Path == "/v2/" {
		return // no authentication
	}
	if h == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}`)
		return
	}
	h(w, r)
}

// handle routes path ("/v2/repo/blobs/sha256:...") to h.
func (f *fakeRegistry) handle(path string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[path] = h
}

// hit is how many requests path had.
func (f *fakeRegistry) hit(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[path]
}

// manifest serves body, of media type mt, as repo's manifest by tag
// and by digest; it returns the digest.
func (f *fakeRegistry) manifest(repo, tag string, mt types.MediaType, body []byte) v1.Hash {
	d := digestOf(body)
	h := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", string(mt))
		w.Header().Set("Docker-Content-Digest", d.String())
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method != http.MethodHead {
			w.Write(body)
		}
	}
	f.handle("/v2/"+repo+"/manifests/"+tag, h)
	f.handle("/v2/"+repo+"/manifests/"+d.String(), h)
	return d
}

// blob serves body as a blob of repo; it returns its path.
func (f *fakeRegistry) blob(repo string, body []byte) string {
	p := "/v2/" + repo + "/blobs/" + digestOf(body).String()
	f.handle(p, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
	return p
}

// image serves img as repo:tag, its manifest passed through edit (which
// may change what it declares) first; it returns the manifest's digest.
func (f *fakeRegistry) image(t testing.TB, img v1.Image, repo, tag string, edit func(*v1.Manifest)) v1.Hash {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	m = m.DeepCopy()
	raw, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	f.blob(repo, raw)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		f.blob(repo, b)
	}
	if edit != nil {
		edit(m)
	}
	return f.manifest(repo, tag, m.MediaType, mustJSON(t, m))
}

func digestOf(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// zeros writes n zero bytes to w, flushing as it goes, without a
// Content-Length: an answer whose size is known only by reading it.
func zeros(w http.ResponseWriter, n int64) {
	buf := make([]byte, 64<<10)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := w.Write(buf[:k]); err != nil {
			return
		}
		n -= k
	}
}

func blobPath(repo string, d v1.Hash) string {
	return fmt.Sprintf("/v2/%s/blobs/%s", repo, d)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
