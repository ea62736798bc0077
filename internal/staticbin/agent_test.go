package staticbin

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
)

// busybox is the host's static busybox (Debian's busybox-static): a
// static program the tests copy where an agent would be.
const busybox = "/bin/busybox"

var staticBusybox = testutil.NewDep("busybox-static", func() error {
	interp, err := Interpreter(busybox)
	if err != nil {
		return err
	}
	if interp != "" {
		return errors.New(busybox + " is dynamically linked")
	}
	return nil
})

// dynamicProgram is a dynamically linked program of the host's.
func dynamicProgram(t *testing.T) string {
	t.Helper()
	testutil.Require(t, testutil.Command("sh"))
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	sh, err = filepath.EvalSymlinks(sh)
	if err != nil {
		t.Fatal(err)
	}
	if interp, err := Interpreter(sh); err != nil || interp == "" {
		t.Fatalf("%s: interpreter %q, %v: want a dynamically linked program", sh, interp, err)
	}
	return sh
}

// TestGoBuildID reads the build ID go tool buildid reads.
func TestGoBuildID(t *testing.T) {
	testutil.Require(t, testutil.Command("go"))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := goBuildID(exe)
	if err != nil || got != strings.TrimSpace(string(out)) {
		t.Errorf("goBuildID = %q, %v; want %q", got, err, out)
	}
	// A program without one (sh, from C) is keyed by its content.
	sh := dynamicProgram(t)
	if id, err := goBuildID(sh); err != nil || id != "" {
		t.Errorf("goBuildID(%s) = %q, %v; want none", sh, id, err)
	}
	k1, err1 := buildKey(sh)
	k2, err2 := buildKey(exe)
	if err1 != nil || err2 != nil || k1 == k2 || !strings.HasPrefix(k1, "linux-") {
		t.Errorf("keys %q, %q (%v, %v)", k1, k2, err1, err2)
	}
}

// TestAgentForStatic: a static program is its own agent.
func TestAgentForStatic(t *testing.T) {
	testutil.Require(t, staticBusybox)
	got, err := agentFor(t.Context(), busybox, t.TempDir(), testutil.Logger(t))
	if err != nil || got != busybox {
		t.Errorf("agentFor(%s) = %q, %v; want itself", busybox, got, err)
	}
}

// TestAgentForCached: a dynamic program's agent, once in the cache, is
// found there without the go command; with an empty cache and no go
// command, the error says what to do and is ErrNoToolchain.
func TestAgentForCached(t *testing.T) {
	testutil.Require(t, staticBusybox)
	self := dynamicProgram(t)
	dir := t.TempDir()
	t.Setenv("PATH", "")
	_, err := agentFor(t.Context(), self, dir, testutil.Logger(t))
	if !errors.Is(err, ErrNoToolchain) || !strings.Contains(err.Error(), "no go command") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("agentFor without go or a cached agent: %v; want ErrNoToolchain saying what to do", err)
	}
	key, err := buildKey(self)
	if err != nil {
		t.Fatal(err)
	}
	want := cachedPath(dir, key)
	copyFile(t, busybox, want)
	got, err := agentFor(t.Context(), self, dir, testutil.Logger(t))
	if err != nil || got != want {
		t.Errorf("agentFor with a cached agent = %q, %v; want %q", got, err, want)
	}
	// A dynamic file in its place is not an agent: it is rebuilt (and,
	// without go, refused).
	copyFile(t, self, want)
	if _, err := agentFor(t.Context(), self, dir, testutil.Logger(t)); !errors.Is(err, ErrNoToolchain) {
		t.Errorf("agentFor with a dynamic file cached: %v; want ErrNoToolchain", err)
	}
}

// TestCompiledDir finds this module's root from this package's source
// path, as a build without -trimpath (go build, go run, go install)
// records it.
func TestCompiledDir(t *testing.T) {
	testutil.Require(t, testutil.Command("go"))
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Dir(strings.TrimSpace(string(out)))
	if got := compiledDir(); got != want {
		t.Errorf("compiledDir() = %q, want %q", got, want)
	}
	if isModule(t.TempDir()) || isModule(filepath.Join(want, "internal")) {
		t.Error("isModule of a directory that is not the module's root")
	}
}

// TestCacheDir: XDG_CACHE_HOME wins; root's is outside any home.
func TestCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/somewhere")
	if got, err := CacheDir(); err != nil || got != "/somewhere/execbox/agent" {
		t.Errorf("CacheDir() = %q, %v", got, err)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	got, err := CacheDir()
	if os.Geteuid() == 0 && got != "/var/cache/execbox/agent" || err != nil {
		t.Errorf("CacheDir() as uid %d = %q, %v", os.Geteuid(), got, err)
	}
}

func TestParseNote(t *testing.T) {
	note := func(name, desc string) []byte {
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(name)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(desc)))
		b = binary.LittleEndian.AppendUint32(b, 4)
		b = append(b, name...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return append(b, desc...)
	}
	if got, err := parseNote(note("Go\x00", "abc/def"), binary.LittleEndian); err != nil || got != "abc/def" {
		t.Errorf("parseNote = %q, %v", got, err)
	}
	for _, b := range [][]byte{nil, note("Go\x00", "abc")[:14], {255, 255, 255, 255, 0, 0, 0, 0, 4, 0, 0, 0}} {
		if _, err := parseNote(b, binary.LittleEndian); err == nil {
			t.Errorf("parseNote(%q): no error", b)
		}
	}
}

func FuzzParseNote(f *testing.F) {
	f.Add([]byte("\x04\x00\x00\x00\x03\x00\x00\x00\x04\x00\x00\x00Go\x00\x00abc"))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := parseNote(b, binary.LittleEndian)
		if err == nil && len(id) > len(b) {
			t.Errorf("a build ID of %d bytes from %d", len(id), len(b))
		}
	})
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
