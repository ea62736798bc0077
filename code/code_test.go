package code_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

// newSandbox returns a local sandbox closed (and checked) at the end of t.
func newSandbox(t *testing.T, spec execbox.Spec) execbox.Sandbox {
	t.Helper()
	sb, err := local.New(local.Options{Logger: testutil.Logger(t)}).Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return sb
}

// testOptions share Go's build cache between test runs: a cold build of
// fmt takes ~15s on two cores.
func testOptions(t *testing.T) code.Options {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return code.Options{CacheDir: filepath.Join(dir, "execbox-test")}
}

// probed holds one Probe of the local runtime for the language deps.
var probed = sync.OnceValues(func() (map[code.Language]code.Status, error) {
	sb, err := local.New(local.Options{}).Create(context.Background(), execbox.Spec{})
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	st, err := code.NewRunner(sb, code.Options{}).Probe(context.Background())
	if err != nil {
		return nil, err
	}
	m := map[code.Language]code.Status{}
	for _, s := range st {
		m[s.Language] = s
	}
	return m, nil
})

// langDeps are the test dependencies "language:NAME": a toolchain for the
// language on the local runtime. CI (EXECBOX_TEST_REQUIRE=all) fails
// instead of skipping without one; .ci/run installs them.
var langDeps = func() map[code.Language]testutil.Dep {
	m := map[code.Language]testutil.Dep{}
	for _, l := range code.Languages() {
		m[l] = testutil.NewDep("language:"+string(l), func() error {
			st, err := probed()
			if err != nil {
				return err
			}
			if !st[l].Available {
				return errors.New(st[l].Detail)
			}
			return nil
		})
	}
	return m
}()

// program is one language's test programs. Each prints without a final
// newline unless said otherwise.
type program struct {
	hello      string         // prints "hello\n"
	stdin      string         // reads a line and prints "got LINE\n"
	exit3      string         // exits with status 3
	throw      string         // fails at run time, saying "boom" on stderr
	compileErr string         // does not compile ("" for interpreted languages)
	loop       string         // busy loop forever
	hog        string         // allocates and touches memory forever
	hogSays    []string       // what it says when allocations fail
	hogSignal  execbox.Signal // or the signal it dies of then
	bytes      string         // writes the bytes ff fe to stdout
}

var programs = map[code.Language]program{
	code.Python: {
		hello:   `print("hello")`,
		stdin:   `print("got " + input())`,
		exit3:   "import sys\nsys.exit(3)",
		throw:   `raise ValueError("boom")`,
		loop:    "while True:\n    pass",
		hog:     "a = []\nwhile True:\n    a.append(b'x' * (16 << 20))",
		hogSays: []string{"MemoryError"},
		bytes:   `import sys; sys.stdout.buffer.write(b"\xff\xfe")`,
	},
	code.JavaScript: {
		hello:   `console.log("hello")`,
		stdin:   `const l = require("fs").readFileSync(0, "utf8").split("\n")[0]; console.log("got " + l)`,
		exit3:   `process.exit(3)`,
		throw:   `throw new Error("boom")`,
		loop:    `for (;;) {}`,
		hog:     `const a = []; for (;;) a.push(Buffer.alloc(16 << 20, 1))`,
		hogSays: []string{"allocation failed", "out of memory", "Out of memory"},
		bytes:   `process.stdout.write(Buffer.from([0xff, 0xfe]))`,
	},
	code.TypeScript: {
		hello:      `const s: string = "hello"; console.log(s)`,
		stdin:      `import { readFileSync } from "fs"; const l: string = readFileSync(0, "utf8").split("\n")[0]; console.log("got " + l)`,
		exit3:      `const code: number = 3; process.exit(code)`,
		throw:      `function f(): never { throw new Error("boom") } f()`,
		compileErr: `const x: number = ;`,
		loop:       `for (;;) {}`,
		hog:        `const a: Buffer[] = []; for (;;) a.push(Buffer.alloc(16 << 20, 1))`,
		hogSays:    []string{"allocation failed", "out of memory", "Out of memory"},
		bytes:      `process.stdout.write(Buffer.from([0xff, 0xfe]))`,
	},
	code.CSharp: {
		hello:      `class P { static void Main() { System.Console.WriteLine("hello"); } }`,
		stdin:      `class P { static void Main() { System.Console.WriteLine("got " + System.Console.ReadLine()); } }`,
		exit3:      `class P { static int Main() { return 3; } }`,
		throw:      `class P { static void Main() { throw new System.InvalidOperationException("boom"); } }`,
		compileErr: `class P { static void Main() { int x = "s"; } }`,
		loop:       `class P { static void Main() { for (;;) {} } }`,
		hog: `using System.Collections.Generic;
class P { static void Main() {
	var a = new List<byte[]>();
	for (;;) { var b = new byte[16 << 20]; for (int i = 0; i < b.Length; i += 4096) b[i] = 1; a.Add(b); }
} }`,
		hogSays: []string{"OutOfMemoryException", "Out of memory", "out of memory"},
		bytes:   `class P { static void Main() { System.Console.OpenStandardOutput().Write(new byte[] { 0xff, 0xfe }, 0, 2); } }`,
	},
	code.Bash: {
		hello:   `echo hello`,
		stdin:   `read -r l; echo "got $l"`,
		exit3:   `exit 3`,
		throw:   "set -e\necho boom >&2\nfalse\necho unreachable",
		loop:    `while :; do :; done`,
		hog:     `s=xxxxxxxxxxxxxxxx; while :; do s+=$s; done`,
		hogSays: []string{"cannot allocate", "xmalloc"},
		bytes:   `printf '\377\376'`,
	},
	code.Sh: {
		hello:     `echo hello`,
		stdin:     `read -r l; echo "got $l"`,
		exit3:     `exit 3`,
		throw:     "set -e\necho boom >&2\nfalse\necho unreachable",
		loop:      `while :; do :; done`,
		hog:       `s=xxxxxxxxxxxxxxxx; while :; do s="$s$s"; done`,
		hogSays:   []string{"Out of space", "out of memory", "Out of memory", "cannot allocate"},
		hogSignal: execbox.SIGSEGV, // dash does not check malloc
		bytes:     `printf '\377\376'`,
	},
	code.Go: {
		hello:      "package main\nimport \"fmt\"\nfunc main() { fmt.Println(\"hello\") }\n",
		stdin:      "package main\nimport (\"bufio\"; \"fmt\"; \"os\")\nfunc main() { s := bufio.NewScanner(os.Stdin); s.Scan(); fmt.Println(\"got \" + s.Text()) }\n",
		exit3:      "package main\nimport \"os\"\nfunc main() { os.Exit(3) }\n",
		throw:      "package main\nfunc main() { panic(\"boom\") }\n",
		compileErr: "package main\nfunc main() { var x int = \"s\" }\n",
		loop:       "package main\nfunc main() { for {} }\n",
		hog:        "package main\nvar a [][]byte\nfunc main() { for { b := make([]byte, 16<<20); for i := 0; i < len(b); i += 4096 { b[i] = 1 }; a = append(a, b) } }\n",
		hogSays:    []string{"out of memory"},
		bytes:      "package main\nimport \"os\"\nfunc main() { os.Stdout.Write([]byte{0xff, 0xfe}) }\n",
	},
	code.C: {
		hello:      "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n",
		stdin:      "#include <stdio.h>\nint main(void) { char l[100]; if (!fgets(l, sizeof l, stdin)) return 1; printf(\"got %s\", l); return 0; }\n",
		exit3:      "int main(void) { return 3; }\n",
		throw:      "#include <stdio.h>\n#include <stdlib.h>\nint main(void) { fputs(\"boom\\n\", stderr); abort(); }\n",
		compileErr: "int main(void) { return x; }\n",
		loop:       "int main(void) { for (volatile int i = 0;; i++) {} }\n",
		hog: `#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) { for (;;) { char *p = malloc(16 << 20); if (!p) { fputs("out of memory\n", stderr); return 1; } memset(p, 1, 16 << 20); } }
`,
		hogSays: []string{"out of memory"},
		bytes:   "#include <stdio.h>\nint main(void) { fputs(\"\\xff\\xfe\", stdout); return 0; }\n",
	},
	code.CPP: {
		hello:      "#include <iostream>\nint main() { std::cout << \"hello\" << std::endl; }\n",
		stdin:      "#include <iostream>\n#include <string>\nint main() { std::string l; std::getline(std::cin, l); std::cout << \"got \" << l << std::endl; }\n",
		exit3:      "int main() { return 3; }\n",
		throw:      "#include <stdexcept>\nint main() { throw std::runtime_error(\"boom\"); }\n",
		compileErr: "int main() { std::string s; }\n",
		loop:       "int main() { for (volatile int i = 0;; i++) {} }\n",
		hog: `#include <vector>
#include <cstring>
int main() { std::vector<char*> a; for (;;) { char *p = new char[16 << 20]; std::memset(p, 1, 16 << 20); a.push_back(p); } }
`,
		hogSays: []string{"bad_alloc"},
		bytes:   "#include <cstdio>\nint main() { std::fputs(\"\\xff\\xfe\", stdout); }\n",
	},
}

// langCase is one test of every language: the request to run and the
// checks of its result.
type langCase struct {
	name  string
	req   func(p program) (code.Request, bool) // false: not for this language
	check func(t *testing.T, p program, res code.Result)
}

var langCases = []langCase{
	{"hello", func(p program) (code.Request, bool) { return code.Request{Source: p.hello}, true },
		func(t *testing.T, p program, res code.Result) {
			if !res.Success() || res.Phase != code.PhaseRun || res.Stdout.Text() != "hello\n" {
				t.Errorf("got %s, stdout %q; want exit 0, stdout \"hello\\n\"", res.String(), res.Stdout.Text())
			}
			if p.compileErr != "" && res.Toolchain != "bun" && res.Compile == nil {
				t.Errorf("no compile result for a compiled language")
			}
			if res.Dir == "" || res.Version == "" || len(res.Command) == 0 {
				t.Errorf("result lacks dir, version or command: %+v", res)
			}
		}},
	{"stdin", func(p program) (code.Request, bool) {
		return code.Request{Source: p.stdin, Stdin: strings.NewReader("abc\ndef\n")}, true
	}, func(t *testing.T, p program, res code.Result) {
		if !res.Success() || res.Stdout.Text() != "got abc\n" {
			t.Errorf("got %s, stdout %q; want exit 0, stdout \"got abc\\n\"", res.String(), res.Stdout.Text())
		}
	}},
	{"exit code", func(p program) (code.Request, bool) { return code.Request{Source: p.exit3}, true },
		func(t *testing.T, p program, res code.Result) {
			if res.Reason != execbox.ReasonExited || res.ExitCode != 3 || res.Phase != code.PhaseRun {
				t.Errorf("got %s in phase %s, want exited 3 in phase run", res.String(), res.Phase)
			}
		}},
	{"exception", func(p program) (code.Request, bool) { return code.Request{Source: p.throw}, true },
		func(t *testing.T, p program, res code.Result) {
			if res.Success() || res.Phase != code.PhaseRun || !strings.Contains(res.Stderr.Text(), "boom") {
				t.Errorf("got %s in phase %s, stderr %q; want a failure in phase run saying boom", res.String(), res.Phase, res.Stderr.Text())
			}
		}},
	{"compile error", func(p program) (code.Request, bool) { return code.Request{Source: p.compileErr}, p.compileErr != "" },
		func(t *testing.T, p program, res code.Result) {
			want := code.PhaseCompile
			if res.Toolchain == "bun" {
				want = code.PhaseRun // bun transpiles as it runs
			}
			if res.Success() || res.Phase != want {
				t.Errorf("got %s in phase %s, want a failure in phase %s", res.String(), res.Phase, want)
			}
			if want == code.PhaseCompile && (res.Compile == nil || res.Compile.Success() || res.Compile.Stdout.Total+res.Compile.Stderr.Total == 0) {
				t.Errorf("compile result %+v: want a failure with diagnostics", res.Compile)
			}
		}},
	{"cpu limit", func(p program) (code.Request, bool) {
		return code.Request{Source: p.loop, Limits: execbox.Limits{CPUTime: time.Second}, Timeout: time.Minute}, true
	}, func(t *testing.T, p program, res code.Result) {
		if res.Reason != execbox.ReasonCPULimit {
			t.Errorf("got %s, want %s", res.String(), execbox.ReasonCPULimit)
		}
	}},
	{"memory limit", func(p program) (code.Request, bool) {
		return code.Request{Source: p.hog, Limits: execbox.Limits{Memory: 64 << 20}, Timeout: time.Minute}, true
	}, func(t *testing.T, p program, res code.Result) {
		if res.Success() {
			t.Fatalf("got %s, want a failure", res.String())
		}
		if res.Reason == execbox.ReasonOOMKilled {
			return
		}
		// No memory cgroup here: the limit was an address-space limit,
		// so the program saw its allocations fail.
		if res.Limits.AddressSpace == 0 {
			t.Fatalf("limits %+v: neither memory nor address space", res.Limits)
		}
		if p.hogSignal != 0 && res.Signal == p.hogSignal {
			return
		}
		out := res.Stdout.Text() + res.Stderr.Text()
		if !slices.ContainsFunc(p.hogSays, func(s string) bool { return strings.Contains(out, s) }) {
			t.Errorf("got %s, output %q: want OOM killed or one of %q", res.String(), out, p.hogSays)
		}
	}},
	{"non-UTF-8 output", func(p program) (code.Request, bool) { return code.Request{Source: p.bytes}, true },
		func(t *testing.T, p program, res code.Result) {
			if !res.Success() || !bytes.Equal(res.Stdout.Data, []byte{0xff, 0xfe}) {
				t.Errorf("got %s, stdout %x; want exit 0, stdout fffe", res.String(), res.Stdout.Data)
			}
			if got := res.Stdout.Text(); got != "\uFFFD" {
				t.Errorf("Text() = %q, want a replacement character", got)
			}
		}},
}

// TestLanguages runs every case of every language, with each toolchain
// present, in one sandbox. The runs start together, a few at a time (they
// mostly wait on processes, which t.Parallel would cap at GOMAXPROCS), and
// subtests check them.
func TestLanguages(t *testing.T) {
	st, _ := probed()
	testLanguages(t, newSandbox(t, execbox.Spec{}), st, testOptions(t))
}

// testLanguages runs every case of every language with a toolchain in sb
// (st, its probe) and whose langDeps the host has, with runners of base.
func testLanguages(t *testing.T, sb execbox.Sandbox, st map[code.Language]code.Status, base code.Options) {
	type outcome struct {
		res code.Result
		err error
	}
	results := map[string]chan outcome{}
	toolchains := map[code.Language][]string{} // available ones, by language
	sem := make(chan struct{}, 4)
	for _, lang := range code.Languages() {
		p, ok := programs[lang]
		if !ok {
			t.Errorf("no test programs for %s", lang)
			continue
		}
		if langDeps[lang].Check() != nil {
			continue // the subtest skips or fails
		}
		// Every toolchain present is tested, not only the preferred one.
		for _, tc := range st[lang].Toolchains {
			if !tc.Available {
				continue
			}
			toolchains[lang] = append(toolchains[lang], tc.Name)
			opts := base
			opts.Toolchains = map[code.Language][]string{lang: {tc.Name}}
			r := code.NewRunner(sb, opts)
			for _, c := range langCases {
				req, ok := c.req(p)
				if !ok {
					continue
				}
				req.Language = lang
				ch := make(chan outcome, 1)
				results[string(lang)+"/"+tc.Name+"/"+c.name] = ch
				go func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					res, err := r.Run(t.Context(), req)
					ch <- outcome{res, err}
				}()
			}
		}
	}
	for _, lang := range code.Languages() {
		t.Run(string(lang), func(t *testing.T) {
			testutil.Require(t, langDeps[lang])
			for _, tc := range toolchains[lang] {
				t.Run(tc, func(t *testing.T) {
					for _, c := range langCases {
						ch, ok := results[string(lang)+"/"+tc+"/"+c.name]
						if !ok {
							continue // not a case for this language
						}
						t.Run(c.name, func(t *testing.T) {
							o := <-ch
							var fe *execbox.FieldError
							if c.name == "memory limit" && errors.Is(o.err, execbox.ErrUnsupported) && errors.As(o.err, &fe) && fe.Field == "limits.memory" {
								// As documented: no memory cgroup, and a
								// toolchain no address-space limit suits.
								t.Logf("%s: %v", tc, o.err)
								return
							}
							if o.err != nil {
								t.Fatalf("Run: %v", o.err)
							}
							res := o.res
							t.Logf("%s %s: %s in %s; stdout %q; stderr %q; limits %+v", res.Toolchain, res.Phase, res.String(), res.Duration, res.Stdout.Text(), res.Stderr.Text(), res.Limits)
							if res.Language != lang || res.Toolchain != tc {
								t.Errorf("language %q with %q, want %q with %q", res.Language, res.Toolchain, lang, tc)
							}
							if res.Compile != nil && res.Phase == code.PhaseRun && !res.Compile.Success() {
								t.Errorf("phase run after a failed compile: %s", res.Compile.String())
							}
							c.check(t, programs[lang], res)
						})
					}
				})
			}
		})
	}
}

func TestUnknownLanguage(t *testing.T) {
	sb := newSandbox(t, execbox.Spec{})
	_, err := code.Run(t.Context(), sb, code.Request{Language: "cobol", Source: "x"})
	var fe *execbox.FieldError
	if !errors.Is(err, execbox.ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != "language" {
		t.Fatalf("got %v, want ErrInvalidArgument for language", err)
	}
	for _, l := range code.Languages() {
		if !strings.Contains(err.Error(), string(l)) {
			t.Errorf("error %q does not list %s", err, l)
		}
	}
}

func TestParseLanguage(t *testing.T) {
	for in, want := range map[string]code.Language{
		"python": code.Python, "Python3": code.Python, "py": code.Python,
		"js": code.JavaScript, "node": code.JavaScript, "ts": code.TypeScript,
		"C#": code.CSharp, "cs": code.CSharp, "golang": code.Go, "c++": code.CPP,
		"cxx": code.CPP, "c": code.C, "bash": code.Bash, "sh": code.Sh,
	} {
		got, err := code.ParseLanguage(in)
		if err != nil || got != want {
			t.Errorf("ParseLanguage(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestValidate(t *testing.T) {
	req := code.Request{
		Language:       "python",
		Files:          []code.File{{Path: "../x"}, {Path: "main.py"}, {Path: ""}, {Path: "ok.txt", Mode: 0o4755}},
		Args:           []string{"a\x00"},
		Env:            map[string]string{"A=B": "1"},
		Limits:         execbox.Limits{CPUTime: time.Millisecond},
		Timeout:        -1,
		CompileTimeout: -1,
		OutputLimit:    -1,
	}
	err := req.Validate()
	if !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Fatalf("got %v, want ErrInvalidArgument", err)
	}
	for _, field := range []string{"source", "files[0].path", "files[1].path", "files[2].path", "files[3].mode", "args[0]", "env.A=B", "limits.cpu_time", "timeout", "compile_timeout", "output_limit"} {
		if !strings.Contains(err.Error(), field+": ") {
			t.Errorf("error does not name %s:\n%v", field, err)
		}
	}
	ok := code.Request{Language: "py", Source: "pass", Limits: execbox.Limits{Memory: -1, CPUTime: -1}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid request: %v", err)
	}
}

// TestMissingInterpreter runs with a PATH where nothing is found.
func TestMissingInterpreter(t *testing.T) {
	sb := newSandbox(t, execbox.Spec{Env: map[string]string{"PATH": t.TempDir()}})
	r := code.NewRunner(sb, code.Options{})
	for _, l := range []code.Language{code.Python, code.TypeScript, code.CSharp} {
		_, err := r.Run(t.Context(), code.Request{Language: l, Source: "x"})
		var me *code.MissingError
		if !errors.Is(err, execbox.ErrNotFound) || !errors.As(err, &me) || me.Language != l {
			t.Fatalf("%s: got %v, want a *MissingError matching ErrNotFound", l, err)
		}
		if !strings.Contains(err.Error(), string(l)) || !strings.Contains(err.Error(), "install") {
			t.Errorf("error %q names neither the language nor what to install", err)
		}
	}
	st, err := r.Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Available || !strings.Contains(s.Detail, "install") || len(s.Toolchains) == 0 {
			t.Errorf("%s: %+v, want unavailable with an install hint", s.Language, s)
		}
	}
}

func TestProbe(t *testing.T) {
	testutil.Require(t, langDeps[code.Python], langDeps[code.Sh])
	sb := newSandbox(t, execbox.Spec{})
	st, err := code.Probe(t.Context(), sb)
	if err != nil {
		t.Fatal(err)
	}
	var names []code.Language
	for _, s := range st {
		names = append(names, s.Language)
		t.Logf("%s: available %v, %s %s %s %s", s.Language, s.Available, s.Toolchain, s.Path, s.Version, s.Detail)
	}
	if !slices.Equal(names, code.Languages()) {
		t.Errorf("languages %v, want %v", names, code.Languages())
	}
	py := st[slices.IndexFunc(st, func(s code.Status) bool { return s.Language == code.Python })]
	if !py.Available || !filepath.IsAbs(py.Path) || py.Version == "" {
		t.Fatalf("python: %+v", py)
	}
	// The path is the interpreter itself, not a version manager's shim
	// (a script): its first bytes are an ELF header.
	b, err := os.ReadFile(py.Path)
	if err != nil || !bytes.HasPrefix(b, []byte("\x7fELF")) {
		t.Errorf("python resolves to %s, which is not an executable binary (%v)", py.Path, err)
	}
}

// countingSandbox counts the commands run through a real sandbox.
type countingSandbox struct {
	execbox.Sandbox
	execs atomic.Int64
}

func (c *countingSandbox) Exec(ctx context.Context, req execbox.ExecRequest) (execbox.Result, error) {
	c.execs.Add(1)
	return c.Sandbox.Exec(ctx, req)
}

// TestResolvesOnce checks that concurrent first runs share one probe.
func TestResolvesOnce(t *testing.T) {
	testutil.Require(t, langDeps[code.Sh])
	sb := &countingSandbox{Sandbox: newSandbox(t, execbox.Spec{})}
	r := code.NewRunner(sb, code.Options{})
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res, err := r.Run(t.Context(), code.Request{Language: code.Sh, Source: "echo hi"})
			if err != nil || !res.Success() {
				t.Errorf("Run: %v %s", err, res.String())
			}
		})
	}
	wg.Wait()
	// n runs and one probe: the limits come from the sandbox's
	// Capabilities, with no command.
	if got := sb.execs.Load(); got > n+1 {
		t.Errorf("%d commands for %d runs: probes are not shared", got, n)
	}
}

func TestFilesAndRunDirectory(t *testing.T) {
	testutil.Require(t, langDeps[code.Python])
	sb := newSandbox(t, execbox.Spec{})
	src := `import helper, os
data = open("data/in.txt").read()
os.makedirs("out", exist_ok=True)
open("out/result.txt", "w").write(helper.shout(data))
print(os.getcwd() == os.environ["HOME"])`
	res, err := code.Run(t.Context(), sb, code.Request{
		Language: code.Python,
		Source:   src,
		Files: []code.File{
			{Path: "helper.py", Content: []byte("def shout(s):\n    return s.upper()\n")},
			{Path: "data/in.txt", Content: []byte("quiet")},
		},
	})
	if err != nil || !res.Success() {
		t.Fatalf("Run: %v %s %s", err, res.String(), res.Stderr.Text())
	}
	if !strings.HasPrefix(res.Dir, code.RunsDir+"/") {
		t.Fatalf("dir %q is not under %s", res.Dir, code.RunsDir)
	}
	if res.Stdout.Text() != "True\n" {
		t.Errorf("HOME is not the run directory: %q", res.Stdout.Text())
	}
	got, err := sb.Files().ReadFile(t.Context(), res.Dir+"/out/result.txt", execbox.ReadOptions{})
	if err != nil || string(got) != "QUIET" {
		t.Errorf("out/result.txt = %q, %v; want QUIET", got, err)
	}
	entries, err := sb.Files().List(t.Context(), res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	for _, want := range []string{"data", "helper.py", "main.py", "out"} {
		if !slices.Contains(names, want) {
			t.Errorf("run directory lists %v, lacking %s", names, want)
		}
	}

	// A second run gets a clean directory of its own.
	res2, err := code.Run(t.Context(), sb, code.Request{Language: code.Python, Source: "import os; print(sorted(os.listdir()))"})
	if err != nil || res2.Stdout.Text() != "['main.py']\n" || res2.Dir == res.Dir {
		t.Errorf("second run: %v %q in %s", err, res2.Stdout.Text(), res2.Dir)
	}

	if err := code.Remove(t.Context(), sb, res.Dir); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Files().Stat(t.Context(), res.Dir); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("after Remove, stat: %v", err)
	}
	if err := code.Remove(t.Context(), sb, "src"); !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("Remove of a non-run directory: %v", err)
	}
	res3, err := code.Run(t.Context(), sb, code.Request{Language: code.Python, Source: "open('f', 'w')", Cleanup: true})
	if err != nil || !res3.Success() || res3.Dir != "" {
		t.Errorf("cleanup run: %v %s dir %q", err, res3.String(), res3.Dir)
	}
	if err := code.RemoveAll(t.Context(), sb); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Files().Stat(t.Context(), code.RunsDir); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("after RemoveAll, stat: %v", err)
	}
}

func TestEnvironment(t *testing.T) {
	testutil.Require(t, langDeps[code.Sh])
	t.Setenv("EXECBOX_CODE_TEST_SECRET", "s3cret")
	sb := newSandbox(t, execbox.Spec{EnvPolicy: execbox.EnvInherit})
	res, err := code.Run(t.Context(), sb, code.Request{
		Language: code.Sh,
		Source:   `echo "secret=$EXECBOX_CODE_TEST_SECRET mine=$MINE home=$HOME"; env | cut -d= -f1 | sort | tr '\n' ' '`,
		Env:      map[string]string{"MINE": "yes"},
	})
	if err != nil || !res.Success() {
		t.Fatalf("Run: %v %s", err, res.String())
	}
	out := res.Stdout.Text()
	home := filepath.Join(sb.Workspace(), res.Dir)
	if !strings.HasPrefix(out, "secret= mine=yes home="+home+"\n") {
		t.Errorf("output %q: want no secret, MINE=yes, HOME=%s", out, home)
	}
	t.Logf("variables: %s", out)
}

func TestLimits(t *testing.T) {
	testutil.Require(t, langDeps[code.Sh])
	sb := newSandbox(t, execbox.Spec{})
	r := code.NewRunner(sb, code.Options{Defaults: map[code.Language]code.Defaults{
		code.Sh: {Limits: execbox.Limits{CPUTime: 5 * time.Second, FileSize: -1}},
	}})
	// Local has rlimits but no cgroups: memory becomes address space, the
	// PIDs default is dropped, the configured defaults apply.
	res, err := r.Run(t.Context(), code.Request{Language: code.Sh, Source: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if l := res.Limits; l.Memory != 0 || l.AddressSpace != 512<<20+256<<20 || l.PIDs != 0 || l.CPUTime != 5*time.Second || l.FileSize != 0 {
		t.Errorf("limits %+v: want address space 768 MiB, CPU 5s, no memory, PIDs or file size", l)
	}
	res, err = r.Run(t.Context(), code.Request{Language: code.Sh, Source: "true", Limits: execbox.Limits{Memory: -1, CPUTime: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if l := res.Limits; l.AddressSpace != 0 || l.CPUTime != 2*time.Second {
		t.Errorf("limits %+v: want none but CPU 2s", l)
	}
	// Asking for what the sandbox cannot enforce is an error naming it.
	_, err = r.Run(t.Context(), code.Request{Language: code.Sh, Source: "true", Limits: execbox.Limits{PIDs: 10}})
	var fe *execbox.FieldError
	if !errors.Is(err, execbox.ErrUnsupported) || !errors.As(err, &fe) || fe.Field != "limits.pids" {
		t.Errorf("PIDs on local: got %v, want ErrUnsupported for limits.pids", err)
	}
	// Invalid options fail every run, naming the field.
	bad := code.NewRunner(sb, code.Options{Toolchains: map[code.Language][]string{code.Python: {"jython"}}})
	if _, err := bad.Run(t.Context(), code.Request{Language: code.Sh, Source: "true"}); !errors.Is(err, execbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "toolchains.python[0]") {
		t.Errorf("bad options: %v", err)
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	testutil.Require(t, langDeps[code.Sh])
	sb := newSandbox(t, execbox.Spec{})
	res, err := code.Run(t.Context(), sb, code.Request{Language: code.Sh, Source: "echo started; sleep 30", Timeout: 200 * time.Millisecond})
	if err != nil || res.Reason != execbox.ReasonTimedOut || res.Stdout.Text() != "started\n" {
		t.Errorf("timeout: %v %s %q", err, res.String(), res.Stdout.Text())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err = code.Run(ctx, sb, code.Request{Language: code.Sh, Source: "sleep 30"})
	if !errors.Is(err, context.DeadlineExceeded) || res.Reason != execbox.ReasonKilled || time.Since(start) > 10*time.Second {
		t.Errorf("cancel: %v %s after %s", err, res.String(), time.Since(start))
	}
}

func TestClosedSandbox(t *testing.T) {
	sb, err := local.New(local.Options{}).Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
	if _, err := code.Run(t.Context(), sb, code.Request{Language: code.Sh, Source: "true"}); !errors.Is(err, execbox.ErrClosed) {
		t.Errorf("got %v, want ErrClosed", err)
	}
}
