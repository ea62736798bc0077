package execboxtest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
)

// Trees are compared as maps from a slash path (relative to the tree's
// root) to "dir PERM", "file PERM CONTENT" or "link TARGET".

func dirEntry(perm fs.FileMode) string { return fmt.Sprintf("dir %#o", perm) }
func fileEntry(perm fs.FileMode, data string) string {
	return fmt.Sprintf("file %#o %q", perm, data)
}
func linkEntry(target string) string { return "link " + target }

// listTree walks root through Files (List, ReadFile), checking FileInfo.Path
// on the way.
func listTree(t *testing.T, f execbox.Files, root string) map[string]string {
	t.Helper()
	ctx := t.Context()
	out := map[string]string{}
	var walk func(dir, rel string)
	walk = func(dir, rel string) {
		ents, err := f.List(ctx, dir)
		if err != nil {
			t.Fatalf("List(%q): %v", dir, err)
		}
		if !slices.IsSortedFunc(ents, func(a, b execbox.FileInfo) int { return strings.Compare(a.Name, b.Name) }) {
			t.Errorf("List(%q): entries not sorted by name", dir)
		}
		for _, e := range ents {
			p := path.Join(dir, e.Name)
			if want := path.Clean(p); e.Path != want && !path.IsAbs(dir) {
				t.Errorf("List(%q): entry %q has Path %q, want %q", dir, e.Name, e.Path, want)
			}
			key := path.Join(rel, e.Name)
			switch {
			case e.Mode&fs.ModeSymlink != 0:
				out[key] = linkEntry(e.Target)
			case e.IsDir():
				out[key] = dirEntry(e.Mode.Perm())
				walk(p, key)
			case e.Mode.IsRegular():
				b, err := f.ReadFile(ctx, p, execbox.ReadOptions{})
				if err != nil {
					t.Fatalf("ReadFile(%q): %v", p, err)
				}
				out[key] = fileEntry(e.Mode.Perm(), string(b))
			default:
				out[key] = "other " + e.Mode.String()
			}
		}
	}
	walk(root, "")
	return out
}

// tarTree reads a tar stream into a tree, with names relative to its root.
func tarTree(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading tar: %v", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." || name == "" {
			continue
		}
		perm := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			out[name] = dirEntry(perm)
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("reading tar entry %s: %v", h.Name, err)
			}
			out[name] = fileEntry(perm, string(b))
		case tar.TypeSymlink:
			out[name] = linkEntry(h.Linkname)
		default:
			out[name] = fmt.Sprintf("other %c", h.Typeflag)
		}
	}
}

type tarEntry struct {
	name     string
	typ      byte
	mode     int64
	data     string
	linkname string
}

func makeTar(t *testing.T, ents []tarEntry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.linkname, ModTime: time.Now(), Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// sampleTar is a small tree with every kind of entry, and the tree it is.
func sampleTar(t *testing.T) (*bytes.Buffer, map[string]string) {
	return makeTar(t, []tarEntry{
			{name: "a.txt", typ: tar.TypeReg, mode: 0o644, data: "A\n"},
			{name: "bin/", typ: tar.TypeDir, mode: 0o755},
			{name: "bin/run.sh", typ: tar.TypeReg, mode: 0o755, data: "#!/bin/sh\necho ran\n"},
			{name: "private.txt", typ: tar.TypeReg, mode: 0o600, data: "p"},
			{name: "link", typ: tar.TypeSymlink, linkname: "a.txt"},
			{name: "empty/", typ: tar.TypeDir, mode: 0o700},
			{name: "implicit/deep/file.txt", typ: tar.TypeReg, mode: 0o644, data: ""},
		}), map[string]string{
			"a.txt":                  fileEntry(0o644, "A\n"),
			"bin":                    dirEntry(0o755),
			"bin/run.sh":             fileEntry(0o755, "#!/bin/sh\necho ran\n"),
			"private.txt":            fileEntry(0o600, "p"),
			"link":                   linkEntry("a.txt"),
			"empty":                  dirEntry(0o700),
			"implicit":               dirEntry(0o755),
			"implicit/deep":          dirEntry(0o755),
			"implicit/deep/file.txt": fileEntry(0o644, ""),
		}
}

// diffTrees reports the differences between got and want.
func diffTrees(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: %s missing, want %s", what, k, want[k])
		} else if g != want[k] {
			t.Errorf("%s: %s is %s, want %s", what, k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected %s: %s", what, k, got[k])
		}
	}
}

func testFiles(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	f, ctx := sb.Files(), t.Context()
	ws := sb.Workspace()

	mustWrite := func(p, data string, opts execbox.WriteOptions) {
		t.Helper()
		if err := f.WriteFile(ctx, p, []byte(data), opts); err != nil {
			t.Fatalf("WriteFile(%q): %v", p, err)
		}
	}
	read := func(p string) string {
		t.Helper()
		b, err := f.ReadFile(ctx, p, execbox.ReadOptions{})
		if err != nil {
			t.Fatalf("ReadFile(%q): %v", p, err)
		}
		return string(b)
	}
	stat := func(p string) execbox.FileInfo {
		t.Helper()
		fi, err := f.Stat(ctx, p)
		if err != nil {
			t.Fatalf("Stat(%q): %v", p, err)
		}
		return fi
	}

	// Write, replace, read, stat.
	mustWrite("a.txt", "hello", execbox.WriteOptions{})
	if got := read("a.txt"); got != "hello" {
		t.Errorf("ReadFile(a.txt) = %q, want hello", got)
	}
	mustWrite("a.txt", "bye", execbox.WriteOptions{})
	if got := read("a.txt"); got != "bye" {
		t.Errorf("ReadFile(a.txt) after replacing = %q, want bye", got)
	}
	fi := stat("a.txt")
	if fi.Name != "a.txt" || fi.Path != "a.txt" || fi.Size != 3 || !fi.Mode.IsRegular() || fi.Mode.Perm() != 0o644 || fi.ModTime.IsZero() {
		t.Errorf("Stat(a.txt) = %+v, want name and path a.txt, size 3, a regular file 0644, a mod time", fi)
	}
	if got := read(ws + "/a.txt"); got != "bye" {
		t.Errorf("ReadFile of the absolute path inside the workspace = %q, want bye", got)
	}

	// Modes, and what commands see.
	mustWrite("run.sh", "#!/bin/sh\necho ran\n", execbox.WriteOptions{Mode: 0o755})
	mustWrite("private", "p", execbox.WriteOptions{Mode: 0o600})
	if m := stat("run.sh").Mode.Perm(); m != 0o755 {
		t.Errorf("WriteFile with Mode 0755: perm %#o", m)
	}
	if m := stat("private").Mode.Perm(); m != 0o600 {
		t.Errorf("WriteFile with Mode 0600: perm %#o", m)
	}
	if got := execOK(t, sb, execbox.ExecRequest{Command: []string{"./run.sh"}}); got != "ran\n" {
		t.Errorf("./run.sh written by WriteFile: stdout %q, want ran", got)
	}
	shOK(t, sb, `printf fromexec > e.txt && ln -s a.txt lnk`)
	if got := read("e.txt"); got != "fromexec" {
		t.Errorf("ReadFile of a file a command wrote = %q", got)
	}

	// Binary and empty content.
	bin := pattern(1 << 20)
	mustWrite("bin.dat", string(bin), execbox.WriteOptions{})
	if got := read("bin.dat"); got != string(bin) {
		t.Errorf("ReadFile of 1 MiB of binary: %d bytes, not what was written", len(got))
	}
	mustWrite("empty", "", execbox.WriteOptions{})
	if got, fi := read("empty"), stat("empty"); got != "" || fi.Size != 0 {
		t.Errorf("empty file: content %q, size %d", got, fi.Size)
	}

	// Read limits.
	if _, err := f.ReadFile(ctx, "a.txt", execbox.ReadOptions{Limit: 2}); !errors.Is(err, execbox.ErrResourceExhausted) {
		t.Errorf("ReadFile of 3 bytes with Limit 2: %v, want ErrResourceExhausted", err)
	}
	if b, err := f.ReadFile(ctx, "a.txt", execbox.ReadOptions{Limit: 3}); err != nil || string(b) != "bye" {
		t.Errorf("ReadFile of 3 bytes with Limit 3 = %q, %v", b, err)
	}

	// Symlinks inside the workspace.
	if fi := stat("lnk"); fi.Mode&fs.ModeSymlink == 0 || fi.Target != "a.txt" {
		t.Errorf("Stat(lnk) = mode %v target %q, want a symlink to a.txt (Stat does not follow it)", fi.Mode, fi.Target)
	}
	if got := read("lnk"); got != "bye" {
		t.Errorf("ReadFile through a symlink inside the workspace = %q, want bye", got)
	}

	// Parents.
	err := f.WriteFile(ctx, "d1/d2/f.txt", []byte("deep"), execbox.WriteOptions{})
	wantKind(t, "WriteFile into a missing directory", err, execbox.ErrNotFound)
	mustWrite("d1/d2/f.txt", "deep", execbox.WriteOptions{Parents: true})
	if got := execOK(t, sb, execbox.ExecRequest{Command: []string{"cat", "d1/d2/f.txt"}}); got != "deep" {
		t.Errorf("cat of a file WriteFile made: %q", got)
	}
	if !stat("d1").IsDir() {
		t.Error("Stat(d1) is not a directory")
	}

	// Mkdir.
	if err := f.Mkdir(ctx, "m", execbox.MkdirOptions{}); err != nil {
		t.Fatalf("Mkdir(m): %v", err)
	}
	if fi := stat("m"); !fi.IsDir() || fi.Mode.Perm() != 0o755 {
		t.Errorf("Mkdir(m): %v, want a directory 0755", fi.Mode)
	}
	if err := f.Mkdir(ctx, "m", execbox.MkdirOptions{}); err == nil {
		t.Error("Mkdir of an existing directory without Parents: nil error")
	}
	if err := f.Mkdir(ctx, "m", execbox.MkdirOptions{Parents: true}); err != nil {
		t.Errorf("Mkdir of an existing directory with Parents: %v", err)
	}
	wantKind(t, "Mkdir(x/y) without Parents", f.Mkdir(ctx, "x/y", execbox.MkdirOptions{}), execbox.ErrNotFound)
	if err := f.Mkdir(ctx, "p/q/r", execbox.MkdirOptions{Parents: true, Mode: 0o700}); err != nil {
		t.Fatalf("Mkdir(p/q/r, Parents): %v", err)
	}
	if fi := stat("p/q/r"); !fi.IsDir() || fi.Mode.Perm() != 0o700 {
		t.Errorf("Mkdir(p/q/r, Mode 0700): %v", fi.Mode)
	}

	// List.
	ents, err := f.List(ctx, ".")
	if err != nil {
		t.Fatalf("List(.): %v", err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	for _, want := range []string{"a.txt", "d1", "e.txt", "lnk", "m", "p", "private", "run.sh"} {
		if !slices.Contains(names, want) {
			t.Errorf("List(.) = %v, missing %s", names, want)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("List(.) = %v, not sorted", names)
	}
	ents, err = f.List(ctx, "d1/d2")
	if err != nil || len(ents) != 1 || ents[0].Name != "f.txt" || ents[0].Path != "d1/d2/f.txt" || ents[0].Size != 4 {
		t.Errorf("List(d1/d2) = %+v, %v; want f.txt with Path d1/d2/f.txt, size 4", ents, err)
	}

	// Not found.
	_, err = f.ReadFile(ctx, "missing", execbox.ReadOptions{})
	wantKind(t, "ReadFile(missing)", err, execbox.ErrNotFound)
	_, err = f.Stat(ctx, "missing")
	wantKind(t, "Stat(missing)", err, execbox.ErrNotFound)
	_, err = f.List(ctx, "missing")
	wantKind(t, "List(missing)", err, execbox.ErrNotFound)
	if _, err := f.ReadFile(ctx, "d1", execbox.ReadOptions{}); err == nil {
		t.Error("ReadFile of a directory: nil error")
	}

	// Remove.
	if err := f.Remove(ctx, "a.txt", execbox.RemoveOptions{}); err != nil {
		t.Fatalf("Remove(a.txt): %v", err)
	}
	_, err = f.Stat(ctx, "a.txt")
	wantKind(t, "Stat after Remove", err, execbox.ErrNotFound)
	wantKind(t, "Remove of a missing file", f.Remove(ctx, "a.txt", execbox.RemoveOptions{}), execbox.ErrNotFound)
	if err := f.Remove(ctx, "d1", execbox.RemoveOptions{}); err == nil {
		t.Error("Remove of a non-empty directory without Recursive: nil error")
	}
	stat("d1/d2/f.txt")
	if err := f.Remove(ctx, "d1", execbox.RemoveOptions{Recursive: true}); err != nil {
		t.Fatalf("Remove(d1, Recursive): %v", err)
	}
	_, err = f.Stat(ctx, "d1")
	wantKind(t, "Stat after a recursive Remove", err, execbox.ErrNotFound)
	if err := f.Remove(ctx, "m", execbox.RemoveOptions{}); err != nil {
		t.Errorf("Remove of an empty directory: %v", err)
	}
	// Removing a symlink removes the link, never its target.
	if err := f.Remove(ctx, "lnk", execbox.RemoveOptions{Recursive: true}); err != nil {
		t.Errorf("Remove(lnk): %v", err)
	}
	if got := read("e.txt"); got != "fromexec" {
		t.Errorf("e.txt = %q", got)
	}
}

func testUploadDownload(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	f, ctx := sb.Files(), t.Context()
	tr, want := sampleTar(t)
	if err := f.Upload(ctx, "up/load", tr); err != nil {
		t.Fatalf("Upload(up/load): %v", err)
	}
	diffTrees(t, "tree after Upload", listTree(t, f, "up/load"), want)
	if got := execOK(t, sb, execbox.ExecRequest{Command: []string{"./bin/run.sh"}, Dir: "up/load"}); got != "ran\n" {
		t.Errorf("uploaded bin/run.sh: stdout %q", got)
	}
	var buf bytes.Buffer
	if err := f.Download(ctx, "up/load", &buf); err != nil {
		t.Fatalf("Download(up/load): %v", err)
	}
	diffTrees(t, "Download(up/load) (names relative to the directory)", tarTree(t, &buf), want)

	// Upload into an existing directory merges.
	extra := makeTar(t, []tarEntry{{name: "more.txt", typ: tar.TypeReg, mode: 0o644, data: "more"}})
	if err := f.Upload(ctx, "up/load", extra); err != nil {
		t.Fatalf("second Upload: %v", err)
	}
	want["more.txt"] = fileEntry(0o644, "more")
	diffTrees(t, "tree after a second Upload", listTree(t, f, "up/load"), want)

	// Round trip through a second sandbox.
	buf.Reset()
	if err := f.Download(ctx, "up", &buf); err != nil {
		t.Fatalf("Download(up): %v", err)
	}
	sb2 := s.create(t, nil)
	if err := sb2.Files().Upload(ctx, ".", &buf); err != nil {
		t.Fatalf("Upload into a second sandbox: %v", err)
	}
	diffTrees(t, "second sandbox", listTree(t, sb2.Files(), "load"), want)
}

func testSnapshot(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	f, ctx := sb.Files(), t.Context()
	tr, _ := sampleTar(t)
	if err := f.Upload(ctx, "tree", tr); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	shOK(t, sb, `printf hidden > .hidden && mkdir -p made/by/exec && printf x > made/by/exec/x && ln -s / escape`)
	want := listTree(t, f, ".")

	var snap bytes.Buffer
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sb.Snapshot(sctx, &snap); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	raw := snap.Bytes()
	snapTree := tarTree(t, bytes.NewReader(raw))
	for name := range snapTree {
		if strings.HasPrefix(name, "escape/") {
			t.Fatalf("Snapshot followed the symlink escape -> / (entry %s)", name)
		}
	}
	diffTrees(t, "Snapshot tar", snapTree, want)

	sb2 := s.create(t, func(sp *execbox.Spec) { sp.Snapshot = bytes.NewReader(raw) })
	diffTrees(t, "sandbox created from the snapshot", listTree(t, sb2.Files(), "."), want)
	if got := execOK(t, sb2, execbox.ExecRequest{Command: []string{"cat", "made/by/exec/x", ".hidden"}}); got != "xhidden" {
		t.Errorf("cat in the sandbox made from the snapshot: %q", got)
	}
}

// testPathConfinement checks guarantee 4's "path outside the workspace":
// Dir, and every Files method, refuse paths that leave the workspace by
// "..", by being absolute elsewhere, or through a symlink, with
// ErrPermission; and nothing is created outside.
func testPathConfinement(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	f, ctx := sb.Files(), t.Context()
	ws := sb.Workspace()
	tok := token()
	out := "/tmp/execbox-outside-" + tok // outside the workspace, as the sandbox sees it
	shOK(t, sb, `mkdir -p "$1" && echo keep > "$1/keep" && mkdir sub &&
		ln -s / escape && ln -s "$1" outdir && ln -s "$1/keep" keeplink && ln -s /etc/passwd pw && ln -s ../.. up2`, out)
	t.Cleanup(func() {
		sb.Exec(context.Background(), execbox.ExecRequest{Command: []string{"rm", "-rf", out, "../execbox-escape-" + tok, "../execbox-escape-dir-" + tok}})
	})

	t.Run("dir", func(t *testing.T) {
		for _, dir := range []string{"..", "../", "/", "/etc", "escape", "escape/etc", "sub/../..", ws + "/..", "outdir", "up2", out} {
			_, err := sb.Exec(ctx, execbox.ExecRequest{Command: []string{"pwd"}, Dir: dir})
			if !errors.Is(err, execbox.ErrPermission) {
				t.Errorf("Exec with Dir %q: %v, want ErrPermission", dir, err)
			}
		}
	})

	check := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, execbox.ErrPermission) {
			t.Errorf("%s: %v, want ErrPermission", what, err)
		}
	}
	t.Run("read", func(t *testing.T) {
		for _, p := range []string{"../../etc/passwd", "/etc/passwd", "escape/etc/passwd", "pw", "outdir/keep", "keeplink", "up2/etc/passwd", ws + "/../x", out + "/keep"} {
			b, err := f.ReadFile(ctx, p, execbox.ReadOptions{})
			check(t, fmt.Sprintf("ReadFile(%q) (read %d bytes)", p, len(b)), err)
		}
		for _, p := range []string{"..", "/etc", "escape/etc", "outdir/keep", out} {
			_, err := f.Stat(ctx, p)
			check(t, fmt.Sprintf("Stat(%q)", p), err)
		}
		for _, p := range []string{"..", "/", "escape", "outdir", "up2", out} {
			_, err := f.List(ctx, p)
			check(t, fmt.Sprintf("List(%q)", p), err)
		}
		for _, p := range []string{"..", out, "escape/etc", "outdir/keep"} {
			var buf bytes.Buffer
			check(t, fmt.Sprintf("Download(%q)", p), f.Download(ctx, p, &buf))
		}
		// Downloading a symlink is refused or yields the link itself, as
		// Stat describes it without following it.
		for _, p := range []string{"escape", "outdir"} {
			var buf bytes.Buffer
			err := f.Download(ctx, p, &buf)
			if err != nil {
				check(t, fmt.Sprintf("Download(%q)", p), err)
				continue
			}
			for name, e := range tarTree(t, &buf) {
				if !strings.HasPrefix(e, "link ") {
					t.Errorf("Download(%q) of a symlink out of the workspace: entry %s is %s, want only the link", p, name, e)
				}
			}
		}
		// The links themselves are inside: Stat describes them.
		fi, err := f.Stat(ctx, "escape")
		if err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != "/" {
			t.Errorf("Stat(escape) = %+v, %v; want a symlink to /", fi, err)
		}
	})
	t.Run("write", func(t *testing.T) {
		data := []byte("escaped")
		for _, p := range []string{"../execbox-escape-" + tok, out + "/new", "escape" + out + "/new2", "outdir/new3", "keeplink", "up2/tmp/execbox-escape-" + tok} {
			check(t, fmt.Sprintf("WriteFile(%q)", p), f.WriteFile(ctx, p, data, execbox.WriteOptions{}))
		}
		for _, p := range []string{"../execbox-escape-dir-" + tok, "escape" + out + "/d", "outdir/d", out + "/d2"} {
			check(t, fmt.Sprintf("Mkdir(%q)", p), f.Mkdir(ctx, p, execbox.MkdirOptions{Parents: true}))
		}
		for _, p := range []string{out + "/keep", "outdir/keep", "escape" + out + "/keep"} {
			check(t, fmt.Sprintf("Remove(%q)", p), f.Remove(ctx, p, execbox.RemoveOptions{}))
		}
		check(t, "Upload(escape/tmp)", f.Upload(ctx, "escape"+out, makeTar(t, []tarEntry{{name: "up", typ: tar.TypeReg, mode: 0o644, data: "x"}})))
		for _, tc := range []struct {
			name string
			ents []tarEntry
		}{
			{"dotdot", []tarEntry{{name: "../execbox-escape-" + tok, typ: tar.TypeReg, mode: 0o644, data: "x"}}},
			{"via-existing-link", []tarEntry{{name: "outdir/evil", typ: tar.TypeReg, mode: 0o644, data: "x"}}},
			{"via-own-link", []tarEntry{
				{name: "lnk", typ: tar.TypeSymlink, linkname: out},
				{name: "lnk/evil", typ: tar.TypeReg, mode: 0o644, data: "x"},
			}},
			{"hardlink-out", []tarEntry{{name: "hl", typ: tar.TypeLink, linkname: out + "/keep"}}},
			{"hardlink-dotdot", []tarEntry{{name: "hl2", typ: tar.TypeLink, linkname: "../../../../../../.." + out + "/keep"}}},
		} {
			dst := "uploads/" + tc.name
			if tc.name == "via-existing-link" {
				dst = "." // where outdir is
			}
			err := f.Upload(ctx, dst, makeTar(t, tc.ents))
			check(t, "Upload of a tar escaping by "+tc.name, err)
		}
		// The links are inside: removing them removes only the link.
		if err := f.Remove(ctx, "outdir", execbox.RemoveOptions{Recursive: true}); err != nil {
			t.Errorf("Remove(outdir) of a symlink: %v", err)
		}
		if err := f.Remove(ctx, "keeplink", execbox.RemoveOptions{}); err != nil {
			t.Errorf("Remove(keeplink) of a symlink: %v", err)
		}
		// Nothing was created, changed or removed outside.
		left := shOKWithZero(t, sb, `for p do [ -e "$p" ] || [ -L "$p" ] && echo "$p"; done; cat "$0/keep"`, out,
			"../execbox-escape-"+tok, out+"/new", out+"/new2", out+"/new3", out+"/d", out+"/d2", "../execbox-escape-dir-"+tok,
			"/tmp/execbox-escape-"+tok, out+"/evil", out+"/up")
		if left != "keep\n" {
			t.Errorf("outside the workspace after the refused writes: %q, want only %s/keep intact (keep)", left, out)
		}
		// The refused hard links are not there either (where each upload
		// would have put it).
		for _, p := range []string{"uploads/hardlink-out/hl", "uploads/hardlink-dotdot/hl2"} {
			if fi, err := f.Stat(ctx, p); !errors.Is(err, execbox.ErrNotFound) {
				t.Errorf("Stat(%s) = %+v, %v; want not_found: a hard link to a file outside was made", p, fi, err)
			}
		}
	})
	t.Run("download-keeps-links", func(t *testing.T) {
		var buf bytes.Buffer
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := f.Download(dctx, ".", &buf); err != nil {
			t.Fatalf("Download(.): %v", err)
		}
		tree := tarTree(t, &buf)
		if got := tree["escape"]; got != linkEntry("/") {
			t.Errorf("Download(.): escape is %q, want %q", got, linkEntry("/"))
		}
		for name := range tree {
			if strings.HasPrefix(name, "escape/") || strings.HasPrefix(name, "up2/") {
				t.Errorf("Download(.) followed a symlink out of the workspace: %s", name)
				break
			}
		}
	})
}

// shOKWithZero is shOK with $0 set to zero.
func shOKWithZero(t *testing.T, sb execbox.Sandbox, script, zero string, args ...string) string {
	t.Helper()
	return execOK(t, sb, execbox.ExecRequest{Command: append([]string{"sh", "-c", script, zero}, args...)})
}

// testFileNamesNotUTF8: a file name is any bytes but NUL and "/"; List
// and Stat give it back exactly, on every runtime (over the wire too),
// never with U+FFFD in place of the bytes that are not UTF-8.
func testFileNamesNotUTF8(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	const name = "a\xffb\xc3("
	// argv must be UTF-8 on the wire: the shell makes the bytes.
	execOK(t, sb, execbox.ExecRequest{Command: []string{"sh", "-c", `n=$(printf 'a\377b\303('); mkdir d && : > "d/$n" && ln -s "$n" d/l`}})
	f, ctx := sb.Files(), t.Context()
	ents, err := f.List(ctx, "d")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	found := false
	for _, e := range ents {
		switch e.Name {
		case name:
			found = true
			if e.Path != "d/"+name {
				t.Errorf("List: path %q, want %q", e.Path, "d/"+name)
			}
		case "l":
			if e.Target != name {
				t.Errorf("List: symlink target %q, want %q", e.Target, name)
			}
		default:
			t.Errorf("List: entry %q (path %q), want %q or \"l\"", e.Name, e.Path, name)
		}
	}
	if !found {
		t.Errorf("List of d does not name %q: %+v", name, ents)
	}
	if fi, err := f.Stat(ctx, "d/"+name); err != nil || fi.Name != name {
		t.Errorf("Stat: %q, %v; want name %q", fi.Name, err, name)
	}
}
