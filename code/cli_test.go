package code_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/internal/cli"
	"github.com/execbox/execbox/internal/testutil"
)

// runCLI runs `execbox run ARGS...` (no configuration file) and returns
// its exit code, stdout and stderr. These tests belong with internal/cli;
// they live here while that package is another engineer's.
func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return runCLIIn(t, t.TempDir(), stdin, args...)
}

// runCLIIn is runCLI with XDG_CACHE_HOME set to xdg: where a run
// without a workspace keeps its caches.
func runCLIIn(t *testing.T, xdg, stdin string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", xdg)
	for _, k := range []string{"EXECBOX_CONFIG", "EXECBOX_WORKSPACE", "EXECBOX_EXEC_TIMEOUT"} {
		t.Setenv(k, "")
	}
	// These tests check host paths and local's limits; the default runtime
	// (sandbox where it works) is covered by the integration tests.
	t.Setenv("EXECBOX_RUNTIME", "local")
	var out, errb bytes.Buffer
	code := cli.Main(t.Context(), append([]string{"run", "--config="}, args...), strings.NewReader(stdin), &out, &errb)
	t.Logf("execbox run %q: %d\nstdout: %q\nstderr: %q", args, code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// TestCLIReadme is the README's first command.
func TestCLIReadme(t *testing.T) {
	testutil.Require(t, langDeps[code.Python])
	if c, out, errs := runCLI(t, "", "--lang", "python", "-c", "print(2+2)"); c != 0 || out != "4\n" || errs != "" {
		t.Errorf("got %d %q %q, want 0 \"4\\n\" and nothing on stderr", c, out, errs)
	}
}

func TestCLIRun(t *testing.T) {
	testutil.Require(t, langDeps[code.Python], langDeps[code.Sh], langDeps[code.C])
	file := filepath.Join(t.TempDir(), "prog.py")
	if err := os.WriteFile(file, []byte("import sys\nprint(sys.argv[1:], input())\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(input, []byte("from file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name         string
		stdin        string
		args         []string
		code         int
		stdout, note string
	}{
		{"file and args", "typed\n", []string{"--lang", "py", file, "a", "b"}, 0, "['a', 'b'] typed\n", ""},
		{"stdin file", "", []string{"--lang", "py", "--stdin-file", input, file}, 0, "[] from file\n", ""},
		{"source from stdin", "echo $1 $HOME", []string{"--lang", "sh", "-", "x"}, 0, "x /", ""},
		{"exit code", "", []string{"--lang", "sh", "-c", "exit 7"}, 7, "", ""},
		{"compile error", "", []string{"--lang", "c", "-c", "int main(void) { return x; }"}, 1, "", "execbox: compile failed: exited 1"},
		{"cpu limit", "", []string{"--lang", "sh", "--cpu-time", "1s", "-c", "while :; do :; done"}, 128 + 24, "", "CPU time limit"},
		{"timeout", "", []string{"--lang", "sh", "--timeout", "300ms", "-c", "sleep 10"}, 124, "", "timed out after 300ms"},
		{"env", "", []string{"--lang", "sh", "--env", "A=1", "-c", "echo $A"}, 0, "1\n", ""},
		{"unknown language", "", []string{"--lang", "cobol", "-c", "x"}, cli.ExitUsage, "", "execbox: --lang: unknown language \"cobol\""},
		{"no language", "", []string{"-c", "x"}, cli.ExitUsage, "", "--lang is required"},
		{"no source", "", []string{"--lang", "sh"}, cli.ExitUsage, "", "no program given"},
		{"unsupported limit", "", []string{"--lang", "sh", "--pids", "3", "-c", "true"}, cli.ExitFailure, "", "--pids: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, out, errs := runCLI(t, tt.stdin, tt.args...)
			if c != tt.code || !strings.HasPrefix(out, tt.stdout) || !strings.Contains(errs, tt.note) {
				t.Errorf("got %d %q %q; want %d, stdout %q, stderr containing %q", c, out, errs, tt.code, tt.stdout, tt.note)
			}
		})
	}
}

func TestCLIJSONAndWorkspace(t *testing.T) {
	testutil.Require(t, langDeps[code.Python])
	ws := t.TempDir()
	c, out, errs := runCLI(t, "", "--json", "--workspace", ws, "--lang", "python", "-c", "open('out.txt', 'w').write('kept')")
	if c != 0 {
		t.Fatalf("exit %d: %s", c, errs)
	}
	// The HTTP API's Result, with the run's details beside its fields.
	var res struct {
		api.Result
		Phase    code.Phase    `json:"phase"`
		Language code.Language `json:"language"`
		Dir      string        `json:"dir"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if r := res.Result.Result(); res.Phase != code.PhaseRun || res.Language != code.Python || !r.Success() || res.Dir == "" {
		t.Errorf("result %+v", res)
	}
	b, err := os.ReadFile(filepath.Join(ws, res.Dir, "out.txt"))
	if err != nil || string(b) != "kept" {
		t.Errorf("out.txt: %q %v", b, err)
	}
	if !strings.Contains(errs, "run directory: "+filepath.Join(ws, res.Dir)) {
		t.Errorf("stderr %q does not say where the run directory is", errs)
	}
}

func TestCLILanguages(t *testing.T) {
	c, out, _ := runCLI(t, "", "--languages")
	for _, l := range code.Languages() {
		if !strings.Contains(out, "\n"+string(l)+" ") {
			t.Errorf("--languages does not list %s", l)
		}
	}
	if c != 0 && c != 1 {
		t.Errorf("exit %d, want 0 or 1", c)
	}
}

// TestCLIToolchain: --toolchain picks the language's toolchain (node
// where bun comes first), and names itself in the error of an unknown
// one.
func TestCLIToolchain(t *testing.T) {
	testutil.Require(t, testutil.Command("node"))
	c, out, errs := runCLI(t, "", "--json", "--lang", "javascript", "--toolchain", "node", "-c", "console.log(typeof process.versions.node)")
	var res struct {
		Toolchain string `json:"toolchain"`
		api.Result
	}
	if err := json.Unmarshal([]byte(out), &res); c != 0 || err != nil || res.Toolchain != "node" || res.Stdout.Text != "string\n" {
		t.Errorf("--toolchain node: exit %d, %v, toolchain %q, stdout %+v (stderr %q)", c, err, res.Toolchain, res.Stdout, errs)
	}
	c, _, errs = runCLI(t, "", "--lang", "js", "--toolchain", "deno", "-c", "1")
	if c != cli.ExitUsage || !strings.HasPrefix(errs, "execbox: --toolchain: unknown toolchain \"deno\" (known: ") {
		t.Errorf("--toolchain deno: exit %d, stderr %q", c, errs)
	}
}

// TestCLIGoCacheKept: every `execbox run --lang go` rebuilt Go's
// standard library (12-26 s), its build cache going with the temporary
// workspace. A run with --cache runs in execbox's own cache directory,
// whose Go build cache the next run finds; its run directory is removed.
// Without --cache a run shares nothing with the next.
func TestCLIGoCacheKept(t *testing.T) {
	testutil.Require(t, langDeps[code.Go])
	// Shared between test runs, as testOptions does: a cold build of
	// fmt takes ~15s on two cores.
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	xdg := filepath.Join(base, "execbox-test")
	ws := filepath.Join(xdg, "execbox", "run")
	// go writes this file into a build cache it opens without one: its
	// return says the runs used the cache here.
	readme := filepath.Join(ws, code.DefaultCacheDir, "go-build", "README")
	if err := os.Remove(readme); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	src := "package main\nimport \"fmt\"\nfunc main() { fmt.Println(6 * 7) }\n"
	for i := range 2 {
		if c, out, errs := runCLIIn(t, xdg, "", "--cache", "--lang", "go", "-c", src); c != 0 || out != "42\n" {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %q", i, c, out, errs)
		}
	}
	if _, err := os.Stat(readme); err != nil {
		t.Errorf("the runs did not use Go's build cache in %s: %v", ws, err)
	}
	if runs, _ := os.ReadDir(filepath.Join(ws, code.RunsDir)); len(runs) != 0 {
		t.Errorf("run directories left in %s: %v", ws, runs)
	}
	// Without --cache: nothing of the run lands in the cache directory.
	empty := t.TempDir()
	if c, out, errs := runCLIIn(t, empty, "", "--lang", "sh", "-c", "echo $PWD"); c != 0 || strings.Contains(out, empty) {
		t.Errorf("run without --cache: exit %d, stdout %q, stderr %q", c, out, errs)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a run without --cache wrote %v in the cache directory", entries)
	}
}
