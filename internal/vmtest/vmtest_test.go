package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
)

// The initramfs is a newc archive the kernel unpacks; busybox's cpio reads
// the same format, so extracting it checks names, modes and contents.
func TestInitrdExtracts(t *testing.T) {
	testutil.Require(t, testutil.Command("busybox"))
	dir := t.TempDir()
	mods := filepath.Join(dir, "modules")
	if err := os.Mkdir(mods, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mods, "9p.ko"), []byte("odd length"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mods, "order"), []byte("9p\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "initrd.cpio")
	if err := buildInitrd(img, mods, []byte("#!busybox")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("busybox", "cpio", "-id")
	cmd.Dir, cmd.Stdin = out, f
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("busybox cpio -id: %v: %s", err, b)
	}
	for name, want := range map[string]string{
		"init":          string(initScript),
		"bin/busybox":   "#!busybox",
		"modules/9p.ko": "odd length",
		"modules/order": "9p\n",
	} {
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || string(got) != want {
			t.Errorf("%s: got %q (%v), want %q", name, got, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(out, "init")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("init: %v, %v; want mode 0755", fi, err)
	}
}

// A -v stream as the guest prints it: verdicts are counted, subtests
// included, and a failing leaf comes back with its first log line.
func TestResultCountsVerdicts(t *testing.T) {
	r := &result{Config: "v2", Duration: 90 * time.Second}
	var sink strings.Builder
	r.scan(strings.NewReader(strings.Join([]string{
		"=== RUN   TestA",
		"=== RUN   TestA/ok",
		"=== RUN   TestA/bad",
		"    env.go:12: Create: cgroup: no such file or directory\r",
		"    env.go:13: second line",
		"=== NAME  TestA/ok",
		"--- FAIL: TestA (1.00s)",
		"    --- PASS: TestA/ok (0.50s)",
		"    --- FAIL: TestA/bad (0.50s)",
		"=== RUN   TestB",
		"    x_test.go:3: missing dependency",
		"--- SKIP: TestB (0.00s)",
		pkgEndMarker + "example.com/p exit 1",
	}, "\n")), &sink)
	if r.Passed != 1 || r.Failed != 2 || r.Skipped != 1 {
		t.Errorf("counts %d/%d/%d, want 1 passed, 2 failed, 1 skipped", r.Passed, r.Failed, r.Skipped)
	}
	got := r.FailureLines()
	want := "vm: v2: FAIL TestA/bad: env.go:12: Create: cgroup: no such file or directory"
	if len(got) != 1 || got[0] != want {
		t.Errorf("failure lines %q, want [%q]", got, want)
	}
	if r.OK() {
		t.Error("OK with failures")
	}
	if !strings.Contains(sink.String(), "[v2] --- FAIL: TestA (1.00s)\n") {
		t.Errorf("output not prefixed per line: %q", sink.String())
	}
	if l := r.Line(); !strings.Contains(l, "FAIL") || !strings.Contains(l, "1 passed, 2 failed, 1 skipped") {
		t.Errorf("summary %q", l)
	}
}

// run.sh quotes what it is given: a -run pattern with spaces, quotes and
// shell syntax reaches the binary intact.
func TestRunScriptQuotes(t *testing.T) {
	pattern := `Test'A|B$(x) "c"`
	bins := []testBinary{{Name: "p", Pkg: "example.com/p", Dir: "/src/p", Path: "/w/bin/p.test"}}
	s := runScript(options{Run: pattern, Timeout: time.Minute}, "rootless", "/w", bins, "status")
	if !strings.Contains(s, quote("-test.run="+pattern)) || !strings.Contains(s, "'/run/vm/bin/p.test'") {
		t.Errorf("script does not pass the pattern or binary through:\n%s", s)
	}
	if !strings.Contains(s, "/usr/bin/setpriv --reuid=1000") {
		t.Errorf("rootless script does not drop to uid 1000:\n%s", s)
	}
	cmd := exec.Command("sh", "-n")
	cmd.Stdin = strings.NewReader(s)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v: %s\n%s", err, b, s)
	}
	out, err := exec.Command("sh", "-c", "printf %s "+quote(pattern)).Output()
	if err != nil || string(out) != pattern {
		t.Errorf("quote round trip: %q, %v", out, err)
	}
}
