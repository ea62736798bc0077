//go:build linux

package server_test

import (
	"archive/tar"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/image"
	"github.com/execbox/execbox/image/imagetest"
	"github.com/execbox/execbox/internal/imageapi"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
)

// smallImage is an image of one file holding content.
func smallImage(t *testing.T, content string) v1.Image {
	t.Helper()
	img, err := imagetest.Image(v1.Config{}, imagetest.Tar(
		imagetest.Entry{Header: tar.Header{Name: "id", Typeflag: tar.TypeReg}, Body: content}))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// imageLayout writes imgs, by tag, into a new OCI layout and returns its
// path.
func imageLayout(t *testing.T, imgs map[string]v1.Image) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for tag, img := range imgs {
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// imageEnv is a server managing a store of its own in a temporary
// directory, and a client of it.
func imageEnv(t *testing.T, opts server.Options) (*env, *imageapi.Store, *client.Client) {
	t.Helper()
	st := imageapi.Lazy(image.Options{Dir: filepath.Join(t.TempDir(), "images"), Logger: testutil.Logger(t)})
	opts.Images = st
	e := newEnv(t, opts)
	c, err := client.New(e.ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	return e, st, c
}

func refsOf(imgs []api.Image) []string {
	var out []string
	for _, img := range imgs {
		out = append(out, img.Ref)
	}
	return out
}

func TestImages(t *testing.T) {
	ctx := t.Context()
	_, st, c := imageEnv(t, server.Options{AllowHostPaths: true})
	dir := imageLayout(t, map[string]v1.Image{"a": smallImage(t, "a"), "b": smallImage(t, "bb")})
	refA, refB := dir+":a", dir+":b"

	if l, err := c.Images(ctx); err != nil || len(l) != 0 {
		t.Fatalf("Images of an empty store = %v, %v", l, err)
	}
	a, err := c.PullImage(ctx, refA)
	if err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	if a.Ref != refA || !strings.HasPrefix(a.ID, "sha256:") || !strings.HasPrefix(a.Digest, "sha256:") ||
		!strings.HasPrefix(a.ChainID, "sha256:") || a.Size < 1 || a.LastUsed.IsZero() || a.InUse {
		t.Errorf("PullImage = %+v", a)
	}
	if _, err := c.PullImage(ctx, refB); err != nil {
		t.Fatal(err)
	}
	l, err := c.Images(ctx)
	if err != nil || !slices.Equal(refsOf(l), []string{refA, refB}) {
		t.Fatalf("Images = %q, %v; want a then b (least recently used first)", refsOf(l), err)
	}
	if l[0] != a {
		t.Errorf("listed %+v, pulled %+v", l[0], a)
	}

	// A sandbox (here: a Use of the same store) holds a.
	store, err := st.Image()
	if err != nil {
		t.Fatal(err)
	}
	img, err := store.Get(refA)
	if err != nil {
		t.Fatal(err)
	}
	release, err := store.Use(img)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if l, _ := c.Images(ctx); len(l) != 2 || !l[1].InUse || l[0].InUse || l[1].Ref != refA {
		t.Errorf("after Use of a: %+v, want a last and in use", l)
	}
	_, err = c.RemoveImage(ctx, refA)
	if !errors.Is(err, execbox.ErrUnavailable) || !strings.Contains(err.Error(), refA) {
		t.Errorf("RemoveImage of an image in use: %v, want ErrUnavailable naming it", err)
	}
	res, err := c.PruneImages(ctx, api.PruneImagesRequest{})
	if err != nil || !slices.Equal(refsOf(res.Removed), []string{refB}) || res.Freed != res.Removed[0].Size {
		t.Errorf("PruneImages = %+v, %v; want b removed, its size freed, a kept (in use)", res, err)
	}
	release()
	gone, err := c.RemoveImage(ctx, refA)
	if err != nil || gone.Ref != refA || gone.ID != a.ID {
		t.Errorf("RemoveImage = %+v, %v", gone, err)
	}
	_, err = c.RemoveImage(ctx, refA)
	if !errors.Is(err, execbox.ErrNotFound) || !strings.Contains(err.Error(), refA) {
		t.Errorf("RemoveImage again: %v, want ErrNotFound naming %s", err, refA)
	}
	if l, err := c.Images(ctx); err != nil || len(l) != 0 {
		t.Errorf("Images at the end = %v, %v", l, err)
	}
	_, err = c.PullImage(ctx, dir+":nosuchtag")
	if !errors.Is(err, execbox.ErrNotFound) || !strings.Contains(err.Error(), dir+":nosuchtag") {
		t.Errorf("PullImage of a missing tag: %v, want ErrNotFound naming it", err)
	}
}

func TestImagesFromRegistry(t *testing.T) {
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	ctx := t.Context()
	_, _, c := imageEnv(t, server.Options{})
	ref := reg.Host + "/team/env:1"
	imagetest.PushImage(t, smallImage(t, "registry"), ref)
	img, err := c.PullImage(ctx, ref)
	if err != nil || img.Ref != ref || img.Size < int64(len("registry")) {
		t.Fatalf("PullImage(%s) = %+v, %v", ref, img, err)
	}
	missing := reg.Host + "/team/none:1"
	_, err = c.PullImage(ctx, missing)
	if !errors.Is(err, execbox.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Errorf("PullImage(%s): %v, want ErrNotFound naming it", missing, err)
	}
}

func TestImageBadRequests(t *testing.T) {
	e, _, _ := imageEnv(t, server.Options{})
	for _, tt := range []struct {
		name, path, body string
		status           int
		code             api.Code
		field            string
	}{
		{"no ref", "/v1/images/pull", `{}`, 400, api.CodeInvalidArgument, "ref"},
		{"no body", "/v1/images/pull", ``, 400, api.CodeInvalidArgument, "body"},
		{"ref not a string", "/v1/images/pull", `{"ref": 3}`, 400, api.CodeInvalidArgument, "ref"},
		{"unknown field", "/v1/images/pull", `{"ref": "x", "reference": "y"}`, 400, api.CodeInvalidArgument, "reference"},
		{"bad reference", "/v1/images/pull", `{"ref": "UPPER/Case:bad tag"}`, 400, api.CodeInvalidArgument, "ref"},
		{"host path", "/v1/images/pull", `{"ref": "/etc"}`, 403, api.CodePermissionDenied, "ref"},
		{"relative host path", "/v1/images/pull", `{"ref": "../x.tar"}`, 403, api.CodePermissionDenied, "ref"},
		{"remove without ref", "/v1/images/remove", `{"ref": ""}`, 400, api.CodeInvalidArgument, "ref"},
		{"remove not JSON", "/v1/images/remove", `ref=x`, 400, api.CodeInvalidArgument, "body"},
		{"negative max_size", "/v1/images/prune", `{"max_size": -1}`, 400, api.CodeInvalidArgument, "max_size"},
		{"max_size not a number", "/v1/images/prune", `{"max_size": "1G"}`, 400, api.CodeInvalidArgument, "max_size"},
		{"image path in a spec", "/v1/sandboxes", `{"image": "./layout:a"}`, 403, api.CodePermissionDenied, "image"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, tt.name, e.json("POST", tt.path, tt.body), tt.status, tt.code, tt.field)
		})
	}
	er := wantError(t, "remove of a ref not in the store", e.json("POST", "/v1/images/remove", `{"ref": "busybox"}`),
		http.StatusNotFound, api.CodeNotFound)
	if er != nil && !strings.Contains(er.Message, "index.docker.io/library/busybox:latest") {
		t.Errorf("not_found %q does not name the reference", er.Message)
	}
	if r := e.json("POST", "/v1/images/prune", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"removed":[]`) {
		t.Errorf("prune without a body: %d %s", r.status, r.body)
	}
}

func TestImagesWithoutStore(t *testing.T) {
	e := newEnv(t, server.Options{})
	wantError(t, "list", e.json("GET", "/v1/images", ""), http.StatusNotImplemented, api.CodeUnsupported)
	wantError(t, "pull", e.json("POST", "/v1/images/pull", `{"ref":"busybox"}`), http.StatusNotImplemented, api.CodeUnsupported)
}
