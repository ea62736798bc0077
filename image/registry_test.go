//go:build linux

package image

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/testutil"
)

var busybox = testutil.NewDep("busybox-static", func() error {
	_, err := imagetest.BusyboxImage()
	return err
})

func busyboxImage(t testing.TB) v1.Image {
	t.Helper()
	testutil.Require(t, busybox)
	img, _ := imagetest.BusyboxImage()
	return img
}

// TestRegistryPullBusybox pulls anonymously, and runs the image's shell
// in its root (as root: chroot).
func TestRegistryPullBusybox(t *testing.T) {
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	ref := reg.Host + "/tools/busybox:1"
	imagetest.PushImage(t, busyboxImage(t), ref)
	s := openStore(t, Options{})
	img, err := s.Pull(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if img.Ref != ref || img.Digest == "" || img.Config.WorkingDir != "/" || img.Config.Env[0] != "PATH=/bin" {
		t.Errorf("image %+v", img)
	}
	if target, err := filepath.EvalSymlinks(filepath.Join(img.RootFS, "bin", "sh")); err != nil || !strings.HasSuffix(target, "/bin/busybox") {
		t.Errorf("bin/sh -> %s, %v", target, err)
	}
	if testutil.Root.Available() {
		out, err := exec.Command("chroot", img.RootFS, "/bin/sh", "-c", "echo hi; id -u user").CombinedOutput()
		if err != nil || string(out) != "hi\n1000\n" {
			t.Errorf("sh in the root: %q, %v", out, err)
		}
	}
}

func TestRegistryAuth(t *testing.T) {
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{User: "alice", Password: "s3cret"})
	ref := reg.Host + "/private/img:1"
	right := authn.FromConfig(authn.AuthConfig{Username: "alice", Password: "s3cret"})
	imagetest.PushImage(t, testImage(t, "private"), ref, remote.WithAuth(right))

	for name, kc := range map[string]authn.Keychain{
		"anonymous":      keychain{authn.Anonymous},
		"wrong password": keychain{authn.FromConfig(authn.AuthConfig{Username: "alice", Password: "nope"})},
	} {
		t.Run(name, func(t *testing.T) {
			s := openStore(t, Options{Keychain: kc})
			_, err := s.Pull(t.Context(), ref)
			if !errors.Is(err, execbox.ErrPermission) || !strings.Contains(err.Error(), ref) {
				t.Errorf("pull: %v, want ErrPermission naming %s", err, ref)
			}
			wantClean(t, s, 0)
		})
	}
	t.Run("keychain", func(t *testing.T) {
		if _, err := openStore(t, Options{Keychain: keychain{right}}).Pull(t.Context(), ref); err != nil {
			t.Error(err)
		}
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv("DOCKER_CONFIG", t.TempDir()) // no docker credentials
		t.Setenv(UserEnv, "alice")
		t.Setenv(PasswordEnv, "s3cret")
		t.Setenv(RegistryEnv, reg.Host)
		if _, err := openStore(t, Options{}).Pull(t.Context(), ref); err != nil {
			t.Error(err)
		}
		t.Setenv(RegistryEnv, "elsewhere.example")
		if _, err := openStore(t, Options{}).Pull(t.Context(), ref); !errors.Is(err, execbox.ErrPermission) {
			t.Errorf("credentials for another registry: %v, want ErrPermission", err)
		}
	})
}

// keychain gives one authenticator to every registry.
type keychain struct{ a authn.Authenticator }

func (k keychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }

func TestRegistryNotFound(t *testing.T) {
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	imagetest.PushImage(t, testImage(t, "x"), reg.Host+"/repo/img:1")
	s := openStore(t, Options{})
	for _, ref := range []string{
		reg.Host + "/repo/img:2",
		reg.Host + "/no/such:1",
		reg.Host + "/repo/img@sha256:" + strings.Repeat("0", 64),
	} {
		_, err := s.Pull(t.Context(), ref)
		if !errors.Is(err, execbox.ErrNotFound) || !strings.Contains(err.Error(), ref) {
			t.Errorf("pull %s: %v, want ErrNotFound naming it", ref, err)
		}
	}
	wantClean(t, s, 0)
}

func TestRegistryUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()
	_, err = openStore(t, Options{}).Pull(t.Context(), host+"/x:1")
	if !errors.Is(err, execbox.ErrUnavailable) {
		t.Errorf("pull from a closed port: %v, want ErrUnavailable", err)
	}
}

// TestRegistryDroppedMidLayer puts a proxy in front of the registry that
// cuts the connection in the middle of every layer blob.
func TestRegistryDroppedMidLayer(t *testing.T) {
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	imagetest.PushImage(t, busyboxImage(t), reg.Host+"/tools/busybox:1")
	proxy := dropProxy(t, reg.Host)
	s := openStore(t, Options{})
	ref := proxy + "/tools/busybox:1"
	_, err := s.Pull(t.Context(), ref)
	if err == nil {
		t.Fatal("pulled through a dropped connection")
	}
	t.Logf("pull: %v", err)
	if !errors.Is(err, execbox.ErrUnavailable) {
		t.Errorf("pull: %v, want ErrUnavailable", err)
	}
	if _, err := s.Get(ref); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("Get: %v, want ErrNotFound", err)
	}
	wantClean(t, s, 0)
}

// dropProxy serves the registry at host, sending only the first half of
// blobs larger than 64 KiB before closing the connection.
func dropProxy(t *testing.T, host string) string {
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: host})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/blobs/") || r.Method != http.MethodGet {
			rp.ServeHTTP(w, r)
			return
		}
		resp, err := http.Get("http://" + host + r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if resp.ContentLength < 64<<10 {
			rp.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Length", resp.Header.Get("Content-Length"))
		w.WriteHeader(resp.StatusCode)
		io.CopyN(w, resp.Body, resp.ContentLength/2)
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// TestRegistryPlatformIndex pulls an index of two platforms.
func TestRegistryPlatformIndex(t *testing.T) {
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	amd := testImage(t, "amd64")
	arm := testImage(t, "arm64")
	cf, _ := arm.ConfigFile()
	cf = cf.DeepCopy()
	cf.Architecture = "arm64"
	arm, _ = mutate.ConfigFile(arm, cf)
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	ref := reg.Host + "/multi/img:1"
	imagetest.PushIndex(t, idx, ref)
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		img, err := openStore(t, Options{Platform: p}).Pull(t.Context(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(img.RootFS, "id")); "linux/"+got != p {
			t.Errorf("platform %s: got the %s image", p, got)
		}
	}
	if _, err := openStore(t, Options{Platform: "linux/s390x"}).Pull(t.Context(), ref); err == nil {
		t.Error("pulled an image for a platform the index lacks")
	}
}

// TestRegistryCorruptBlob replaces a layer blob in the registry's storage
// with bytes of the same size: a digest check fails the pull.
func TestRegistryCorruptBlob(t *testing.T) {
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	img := testImage(t, "genuine")
	ref := reg.Host + "/repo/img:1"
	imagetest.PushImage(t, img, ref)
	layers, _ := img.Layers()
	d, _ := layers[1].Digest()
	blob := filepath.Join(reg.Dir, "docker/registry/v2/blobs/sha256", d.Hex[:2], d.Hex, "data")
	b := []byte(readFile(t, blob))
	b[4] ^= 0xff // the gzip header's mtime: same size, same content, another digest
	if err := writeAtomic(blob, b); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, Options{})
	_, err := s.Pull(t.Context(), ref)
	if err == nil {
		t.Fatal("pulled a forged blob")
	}
	t.Logf("pull: %v", err)
	wantClean(t, s, 0)
}

// TestRegistryPython pushes the host's Python as an image, pulls it from
// the loopback registry and, as root, runs it in its root.
func TestRegistryPython(t *testing.T) {
	testutil.Require(t, testutil.NewDep("file:"+imagetest.Python, func() error {
		_, err := exec.LookPath(imagetest.Python)
		return err
	}))
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	start := time.Now()
	img, err := imagetest.PythonImage()
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Host + "/lang/python:3.11"
	imagetest.PushImage(t, img, ref)
	t.Logf("build and push: %v", time.Since(start))
	s := openStore(t, Options{})
	start = time.Now()
	pulled, err := s.Pull(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pull and unpack: %v (%d MB unpacked)", time.Since(start), pulled.Size>>20)
	start = time.Now()
	if _, err := s.Ensure(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	t.Logf("Ensure, cached: %v", time.Since(start))
	if testutil.Root.Available() {
		out, err := exec.Command("chroot", pulled.RootFS, imagetest.Python, "-c", "import json, ssl; print(2+2)").CombinedOutput()
		if err != nil || string(out) != "4\n" {
			t.Errorf("python in the root: %q, %v", out, err)
		}
	}
}
