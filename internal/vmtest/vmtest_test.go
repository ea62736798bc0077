package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
// included, each to the configuration whose markers enclose it, and a
// failing leaf comes back with its first log line.
func TestResultCountsVerdicts(t *testing.T) {
	r := &result{Config: "v2"}
	other := &result{Config: "v1"}
	var sink strings.Builder
	c := console{guest: "vm1", results: []*result{other, r}, start: time.Now()}
	c.scan(strings.NewReader(strings.Join([]string{
		"vm: 6.1.0-56-amd64, 1 cpus",
		configMarker + "v1 begin",
		"--- PASS: TestA (1.00s)",
		configMarker + "v1 end 0",
		configMarker + "v2 begin",
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
		"vm: v2: host: left a mount behind: /tmp/x",
		configMarker + "v2 end 1",
	}, "\n")), &sink)
	if other.Passed != 1 || other.Failed != 0 {
		t.Errorf("v1 counts %d/%d, want 1 passed", other.Passed, other.Failed)
	}
	if r.Passed != 1 || r.Failed != 2 || r.Skipped != 1 {
		t.Errorf("counts %d/%d/%d, want 1 passed, 2 failed, 1 skipped", r.Passed, r.Failed, r.Skipped)
	}
	got := r.FailureLines()
	want := []string{"vm: v2: FAIL TestA/bad: env.go:12: Create: cgroup: no such file or directory", "vm: v2: host: left a mount behind: /tmp/x"}
	if !slices.Equal(got, want) {
		t.Errorf("failure lines %q, want %q", got, want)
	}
	if len(r.Walls) != 2 || r.Walls[0].Test != "TestA" || r.Walls[1].Test != "TestB" || len(other.Walls) != 0 {
		t.Errorf("top-level wall times %v (v1: %v), want TestA's and TestB's", r.Walls, other.Walls)
	}
	if r.OK() {
		t.Error("OK with failures")
	}
	if !strings.Contains(sink.String(), "[v2] --- FAIL: TestA (1.00s)\n") || !strings.Contains(sink.String(), "[vm1] vm: 6.1.0") {
		t.Errorf("output not prefixed per line: %q", sink.String())
	}
	if l := r.Line(); !strings.Contains(l, "FAIL") || !strings.Contains(l, "1 passed, 2 failed, 1 skipped") {
		t.Errorf("summary %q", l)
	}
}

// The run script quotes what it is given: a -run pattern with spaces,
// quotes and shell syntax reaches the binary intact.
func TestRunScriptQuotes(t *testing.T) {
	pattern := `Test'A|B$(x) "c"`
	bins := []testBinary{{Name: "p", Pkg: "example.com/p", Dir: "/src/p", Path: "/w/bin/p.test"}}
	s := guestScript(options{Run: pattern, Timeout: time.Minute, Tmp: "ext4"}, []*result{{Config: "v1"}, {Config: "rootless"}}, "/w", bins)
	if !strings.Contains(s, quote("-test.run="+pattern)) || !strings.Contains(s, "'/run/vm/bin/p.test'") {
		t.Errorf("script does not pass the pattern or binary through:\n%s", s)
	}
	if !strings.Contains(s, "/usr/bin/setpriv --reuid=1000") {
		t.Errorf("rootless script does not drop to uid 1000:\n%s", s)
	}
	cmd := exec.Command("sh", "-n")
	cmd.Stdin = strings.NewReader(string(guestFuncs) + s)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v: %s\n%s", err, b, s)
	}
	out, err := exec.Command("sh", "-c", "printf %s "+quote(pattern)).Output()
	if err != nil || string(out) != pattern {
		t.Errorf("quote round trip: %q, %v", out, err)
	}
}

// Every test function of the packages the VM runs has an entry in
// selection, and every entry names a test that exists: a new test gets
// its place in the VM matrix (or make test alone) decided and written
// down.
func TestSelectionCoversEveryTest(t *testing.T) {
	for pkg, tests := range selection {
		files, err := filepath.Glob(filepath.Join("..", "..", filepath.FromSlash(pkg), "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("%s: no test files (%v)", pkg, err)
			continue
		}
		found := map[string]bool{}
		var src strings.Builder
		fset := token.NewFileSet()
		for _, name := range files {
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(name)
			src.Write(b)
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && isTest(fn) {
					found[fn.Name.Name] = true
				}
			}
		}
		for name := range found {
			if _, ok := tests[name]; !ok {
				t.Errorf("%s: %s has no entry in selection (internal/vmtest/selection.go): say on which host kinds it runs, and why", pkg, name)
			}
		}
		for name, w := range tests {
			top, sub, nested := strings.Cut(name, "/")
			if !found[top] {
				t.Errorf("%s: selection names %s, which is not a test there", pkg, name)
			}
			if nested {
				for _, e := range strings.Split(sub, "/") {
					if !strings.Contains(src.String(), strconv.Quote(e)) {
						t.Errorf("%s: selection names subtest %s, but no test there names %q", pkg, name, e)
					}
				}
				if !found[top] || len(tests[top].on) == 0 {
					continue
				}
				for _, c := range w.on {
					if !slices.Contains(tests[top].on, c) {
						t.Errorf("%s: %s runs on %s, where %s does not", pkg, name, c, top)
					}
				}
			}
			for _, c := range w.on {
				if _, ok := configs[c]; !ok {
					t.Errorf("%s: %s: unknown configuration %q", pkg, name, c)
				}
			}
			if w.why == "" {
				t.Errorf("%s: %s: no reason given", pkg, name)
			}
		}
	}
}

// VM.md shows the selection as it is.
func TestSelectionInVMmd(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "VM.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), selectionTable()) {
		t.Errorf("VM.md does not show the selection as it is: put the output of go run ./internal/vmtest -selection in its place")
	}
}

// isTest reports whether fn is a test function: TestXxx(t *testing.T).
func isTest(fn *ast.FuncDecl) bool {
	if !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" || fn.Type.Params == nil || len(fn.Type.Params.List) != 1 {
		return false
	}
	star, ok := fn.Type.Params.List[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "T"
}

// The patterns run the tests of a configuration, skip a subtest where
// its entry narrows it, and leave a package out where none of its tests
// runs; a package without a selection runs whole.
func TestSelected(t *testing.T) {
	run, skip, any := selected("runtimes/sandbox", "rootless")
	re := regexp.MustCompile(run)
	if !any || !re.MatchString("TestConformance") || re.MatchString("TestAssetSourceSymlinkRace") || re.MatchString("TestImageRoot") || re.MatchString("TestConformanceX") {
		t.Errorf("rootless: run %q", run)
	}
	if skip != `^TestIsolationSeccomp$/^ordinary-programs$/^go$` {
		t.Errorf("rootless: skip %q", skip)
	}
	run, skip, _ = selected("runtimes/sandbox", "v2")
	if !regexp.MustCompile(run).MatchString("TestImageRoot") || skip != "" {
		t.Errorf("v2: run %q, skip %q", run, skip)
	}
	if run, skip, any := selected("code", "v1"); !any || run != "" || skip != "" {
		t.Errorf("a package without a selection: %q %q %v", run, skip, any)
	}
	selection["example"] = map[string]where{"TestA": {hostOnly, "x"}}
	defer delete(selection, "example")
	if _, _, any := selected("example", "v2"); any {
		t.Error("a package whose tests are all the host's still runs")
	}
}

// The default configurations split into two slots of near cost, with
// v1 in a boot of its own (it cannot share one with cgroup2) and first.
func TestPlan(t *testing.T) {
	var rs []*result
	for _, c := range everyKind {
		rs = append(rs, &result{Config: c})
	}
	slots := plan(rs, 2)
	if len(slots) != 2 {
		t.Fatalf("%d slots, want 2", len(slots))
	}
	seen := map[string]bool{}
	var load []int
	for _, slot := range slots {
		n := 0
		for _, g := range slot {
			for _, r := range g {
				if seen[r.Config] {
					t.Errorf("%s planned twice", r.Config)
				}
				seen[r.Config] = true
				n += configs[r.Config].cost
				if configs[r.Config].cgroups != configs[g[0].Config].cgroups {
					t.Errorf("a guest runs %s and %s: v1 and v2 in one boot", g[0].Config, r.Config)
				}
			}
		}
		if slot[0][0].Config != "v1" && slices.ContainsFunc(slot, func(g []*result) bool { return g[0].Config == "v1" }) {
			t.Errorf("v1 is not its slot's first guest: %v", slot)
		}
		load = append(load, n)
	}
	if len(seen) != len(everyKind) {
		t.Errorf("planned %v, want all of %v", seen, everyKind)
	}
	if d := load[0] - load[1]; d > 400 || d < -400 {
		t.Errorf("slot costs %v: unbalanced", load)
	}
	if one := plan(rs, 1); len(one) != 1 || len(one[0]) != 2 {
		t.Errorf("one slot: %d guests, want 2 (v1's boot and the v2 kinds')", len(one[0]))
	}
}

// Neither a file that is no ELF nor an ELF file without the note (this
// test binary) passes for a PVH kernel: the guest then boots the
// compressed kernel. (make test-vm boots the unpacked one.)
func TestPVHEntry(t *testing.T) {
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if hasPVHEntry(self) {
		t.Error("a PVH entry in the test binary")
	}
	if hasPVHEntry([]byte("not elf")) {
		t.Error("a PVH entry in a non-ELF file")
	}
}
