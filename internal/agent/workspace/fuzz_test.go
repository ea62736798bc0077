package workspace

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox"
)

// FuzzResolve: a path Resolve accepts is clean, relative and inside the
// workspace, lexically and once joined to its directory; one it refuses
// is a *FieldError naming the field.
func FuzzResolve(f *testing.F) {
	for _, p := range []string{"", ".", "a/b", "a/../b", "../x", "a/../../x", "/", "/etc/passwd", "./a//b/", "a\x00b", "..a", "a/..", "/ws/a"} {
		f.Add(p)
	}
	w, err := Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { w.Close() })
	f.Add(w.Dir() + "/a/../b")
	f.Add(w.Dir() + "/../x")
	f.Add(w.Dir() + "x")
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := w.Resolve("path", p)
		if err != nil {
			var fe *execbox.FieldError
			if !errors.As(err, &fe) || fe.Field != "path" {
				t.Fatalf("Resolve(%q): %v, not a FieldError naming path", p, err)
			}
			return
		}
		if rel == "" || filepath.IsAbs(rel) || filepath.Clean(rel) != rel || strings.IndexByte(rel, 0) >= 0 {
			t.Fatalf("Resolve(%q) = %q, not a clean relative path", p, rel)
		}
		if rel == ".." || strings.HasPrefix(rel, "../") {
			t.Fatalf("Resolve(%q) = %q leaves the workspace", p, rel)
		}
		full := filepath.Join(w.Dir(), rel)
		if full != w.Dir() && !strings.HasPrefix(full, w.Dir()+"/") {
			t.Fatalf("Resolve(%q) = %q, which is %q, outside %q", p, rel, full, w.Dir())
		}
		if again, err := w.Resolve("path", rel); err != nil || again != rel {
			t.Fatalf("Resolve(%q) = %q, which resolves to %q, %v", p, rel, again, err)
		}
	})
}

// buildTar makes a tar stream from a spec, one entry a line:
// "KIND NAME [TARGET]" with KIND d (directory), f (file, TARGET is its
// content), l (symlink) or h (hard link). Lines it cannot read are
// skipped, so every mutation of a spec is a stream.
func buildTar(spec string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, line := range strings.Split(spec, "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) < 2 || f[1] == "" {
			continue
		}
		hdr := &tar.Header{Name: f[1], Mode: 0o644, Format: tar.FormatPAX}
		extra := ""
		if len(f) == 3 {
			extra = f[2]
		}
		switch f[0] {
		case "d":
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		case "f":
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(extra))
		case "l":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, extra
		case "h":
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, extra
		default:
			continue
		}
		if tw.WriteHeader(hdr) != nil {
			continue
		}
		if hdr.Typeflag == tar.TypeReg {
			tw.Write([]byte(extra))
		}
	}
	tw.Close()
	return buf.Bytes()
}

// snapshot lists every entry under dir with its kind and, for files, its
// content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		v := d.Type().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v = string(b)
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzUpload: whatever the tar stream, Upload never panics, never
// creates, changes or removes anything outside the target directory (a
// sibling directory and a file beside the workspace are watched), and
// never leaves a half-written temporary file behind.
func FuzzUpload(f *testing.F) {
	for _, s := range []string{
		"d a\nf a/b hello\nf c world",
		"f ../escape x",
		"f /abs x",
		"l link ../../outside\nf link/pwned x",
		"l link ../sibling\nf link/pwned x",
		"l up2 ..\nf up2/x y",
		"f a x\nh b a\nh c ../sibling/keep",
		"l a /\nh b a",
		"d a\nl a/b ../../sibling\nd a/b/c",
		"f a 1\nd a\nf a/b 2\nl a x\nf a 3",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, spec string, truncate bool) {
		tmp := t.TempDir()
		ws := filepath.Join(tmp, "ws")
		for _, d := range []string{ws, filepath.Join(ws, "sibling"), filepath.Join(tmp, "outside")} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{filepath.Join(ws, "sibling", "keep"), filepath.Join(tmp, "outside", "keep")} {
			if err := os.WriteFile(p, []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		w, err := Open(ws)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		before := snapshot(t, tmp)

		stream := buildTar(spec)
		if truncate && len(stream) > 0 {
			stream = stream[:len(stream)*2/3]
		}
		_ = w.Upload(context.Background(), "up", bytes.NewReader(stream))

		after := snapshot(t, tmp)
		target := filepath.Join(ws, "up")
		for p, v := range after {
			if p == target || strings.HasPrefix(p, target+"/") {
				if strings.HasSuffix(p, ".tmp") && strings.HasPrefix(filepath.Base(p), ".execbox-") {
					t.Fatalf("spec %q: half-written file %s left", spec, p)
				}
				continue
			}
			if b, ok := before[p]; !ok || b != v {
				t.Fatalf("spec %q: %s outside the target directory was created or changed (%q)", spec, p, v)
			}
		}
		for p := range before {
			if _, ok := after[p]; !ok {
				t.Fatalf("spec %q: %s outside the target directory was removed", spec, p)
			}
		}
	})
}
