package code

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// asOff marks a toolchain whose memory cannot be capped by an address-space
// limit: it reserves far more virtual memory than it uses.
const asOff = -1

// toolchain is one way to run a language: an interpreter, or a compiler and
// what runs its output. Each language has an ordered list of them; the
// first one the sandbox has wins.
type toolchain struct {
	name string
	lang Language
	// script is a POSIX sh probe run in the sandbox. On success it prints
	// the resolved binary's absolute path, its version, and the extra
	// paths the toolchain needs, one per line, and exits 0; otherwise it
	// says on stderr what is missing and exits non-zero.
	script string
	// nExtra is the number of extra paths script prints.
	nExtra int
	// check, if set, vets a probe's result (a version too old, ...) and
	// may rewrite it, leaving only paths in extra.
	check func(rs *resolved) error

	// compile returns the compiler's argv, or nil for an interpreter.
	compile func(rs *resolved, rc *runContext) []string
	// run returns the program's argv.
	run func(rs *resolved, rc *runContext) []string
	// env adds variables the toolchain needs; nil for none.
	env func(rs *resolved, rc *runContext) map[string]string
	// setup, if set, returns extra files to write before compiling (a
	// project file), by name relative to the run directory.
	setup func(rs *resolved, rc *runContext) map[string]string

	// runHeadroom and compileHeadroom are added to the memory limit to
	// make an address-space limit where the sandbox has no memory cgroup,
	// covering what the runtime reserves without using; asOff where that
	// cannot work. Measured minimum address space on x86-64 Linux: python
	// 16-24 MiB, mono 48 MiB, mcs 88 MiB, gcc 48 MiB, bash 8 MiB, node 20
	// 712 MiB, a Go program 688 MiB, go build 808 MiB.
	runHeadroom, compileHeadroom int64
}

// resolved is a toolchain found in a sandbox.
type resolved struct {
	tc      *toolchain
	path    string   // the interpreter or compiler, absolute, not a shim
	version string   // its version, e.g. "3.11.7"
	extra   []string // further absolute paths (nExtra of them)
}

// runContext is what a toolchain needs to build its commands.
type runContext struct {
	dir          string   // the run directory, absolute, as commands see it
	main         string   // the source file's name in dir
	files        []string // names of the request's files, relative to dir
	args         []string // the program's arguments
	compileFlags []string
	cacheDir     string // absolute, as commands see it
}

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// toolchains lists each language's toolchains in order of preference.
var toolchains = map[Language][]*toolchain{
	Python:     {pythonTC},
	JavaScript: {bunJS, nodeJS},
	TypeScript: {bunTS, esbuildTS, nodeTS},
	CSharp:     {dotnetCS, monoCS},
	Bash:       {bashTC},
	Sh:         {shTC},
	Go:         {goTC},
	C:          {gccTC},
	CPP:        {gxxTC},
}

// installHint says what to install for a language, for error messages.
var installHint = map[Language]string{
	Python:     "install Python 3 (Debian: apt-get install python3)",
	JavaScript: "install Node.js (Debian: apt-get install nodejs) or Bun",
	TypeScript: "install Bun, or Node.js with esbuild (npm install -g esbuild), or Node.js 22.6 or later",
	CSharp:     "install the .NET SDK, or Mono (Debian: apt-get install mono-mcs mono-runtime)",
	Bash:       "install bash (Debian: apt-get install bash)",
	Sh:         "install a POSIX shell as sh (Debian: apt-get install dash)",
	Go:         "install Go (Debian: apt-get install golang-go)",
	C:          "install gcc (Debian: apt-get install gcc libc6-dev)",
	CPP:        "install g++ (Debian: apt-get install g++)",
}

// prelude starts every probe script: need finds program $1 in PATH or fails
// naming it; real resolves symlinks where readlink -f exists.
const prelude = `need() { command -v "$1" 2>/dev/null || { echo "$1 not found in PATH" >&2; exit 1; }; }
real() { readlink -f "$1" 2>/dev/null || echo "$1"; }
cd / 2>/dev/null
`

var pythonTC = &toolchain{
	name: "python3",
	lang: Python,
	// sys.executable is the real interpreter behind a version manager's
	// shim (pyenv, asdf), and keeps a virtual environment's own python.
	// -S skips the site imports, most of the start-up time.
	script: prelude + `for c in python3 python; do
	p=$(command -v "$c" 2>/dev/null) || continue
	"$p" -S -c 'import sys
v = "%d.%d.%d" % sys.version_info[:3]
if sys.version_info[0] < 3: sys.exit("%s is Python %s" % (sys.executable, v))
print(sys.executable); print(v)' && exit 0
done
echo "python3 not found in PATH" >&2; exit 1`,
	run: func(rs *resolved, rc *runContext) []string {
		return append([]string{rs.path, rc.main}, rc.args...)
	},
	env: func(rs *resolved, rc *runContext) map[string]string {
		// Unbuffered, so output written before a kill (timeout, CPU
		// limit) is not lost; no __pycache__ in the run directory.
		return map[string]string{"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
	},
	runHeadroom: 512 * mib,
}

// nodeScript prints node's real path and version.
const nodeScript = prelude + `p=$(need node) || exit 1
exec "$p" -e 'console.log(process.execPath); console.log(process.versions.node)'`

// bunScript prints bun's real path and version.
const bunScript = prelude + `p=$(need bun) || exit 1
exec "$p" -e 'console.log(process.execPath); console.log(Bun.version)'`

var nodeJS = &toolchain{
	name:   "node",
	lang:   JavaScript,
	script: nodeScript,
	run: func(rs *resolved, rc *runContext) []string {
		return append(append([]string{rs.path}, nodeFlags(rs.version)...), append([]string{rc.main}, rc.args...)...)
	},
	runHeadroom: 2 * gib,
}

var bunJS = &toolchain{
	name:   "bun",
	lang:   JavaScript,
	script: bunScript,
	run: func(rs *resolved, rc *runContext) []string {
		return append([]string{rs.path, rc.main}, rc.args...)
	},
	runHeadroom: 2 * gib,
}

var bunTS = &toolchain{
	name:        "bun",
	lang:        TypeScript,
	script:      bunScript,
	run:         bunJS.run,
	runHeadroom: 2 * gib,
}

// esbuildBanner gives the ES module esbuild writes what CommonJS code
// expects, so that TypeScript using require or __dirname runs too.
const esbuildBanner = `import{createRequire as __execbox_cr}from"module";` +
	`import{fileURLToPath as __execbox_fp}from"url";` +
	`import{dirname as __execbox_dn}from"path";` +
	`const require=__execbox_cr(import.meta.url);` +
	`const __filename=__execbox_fp(import.meta.url);` +
	`const __dirname=__execbox_dn(__filename);`

// esbuildTS transpiles with esbuild (no type checking, as bun, tsx and
// node do), bundling the run directory's own modules into one ES module
// and leaving packages external, then runs it with node. A syntax error is
// a compile error.
var esbuildTS = &toolchain{
	name: "node+esbuild",
	lang: TypeScript,
	script: prelude + `n=$(need node) || exit 1
e=$(need esbuild) || exit 1
e=$(real "$e")
"$n" -e 'console.log(process.execPath); console.log(process.versions.node)' || exit 1
v=$("$e" --version) || exit 1
echo "$e"; echo "esbuild $v"`,
	nExtra: 2,
	check: func(rs *resolved) error {
		// extra = [esbuild path, "esbuild VERSION"]; fold the latter into
		// the version.
		rs.version = "node " + rs.version + ", " + rs.extra[1]
		rs.extra = rs.extra[:1]
		return nil
	},
	compile: func(rs *resolved, rc *runContext) []string {
		return append([]string{rs.extra[0], rc.main,
			"--bundle", "--platform=node", "--format=esm", "--packages=external",
			"--sourcemap=inline", "--log-level=warning", "--outfile=main.mjs",
			"--banner:js=" + esbuildBanner,
		}, rc.compileFlags...)
	},
	run: func(rs *resolved, rc *runContext) []string {
		return append([]string{rs.path, "--enable-source-maps", "main.mjs"}, rc.args...)
	},
	runHeadroom:     2 * gib,
	compileHeadroom: 1 * gib, // esbuild is a Go program
}

// nodeTS runs TypeScript with node's own type stripping (22.6 and later).
var nodeTS = &toolchain{
	name:   "node",
	lang:   TypeScript,
	script: nodeScript,
	check: func(rs *resolved) error {
		if !versionAtLeast(rs.version, 22, 6) {
			return fmt.Errorf("node %s cannot run TypeScript (needs 22.6 or later)", rs.version)
		}
		return nil
	},
	run: func(rs *resolved, rc *runContext) []string {
		argv := []string{rs.path, "--disable-warning=ExperimentalWarning"}
		// Type stripping is on by default from 23.6 and 22.18.
		if !versionAtLeast(rs.version, 23, 6) && !(versionAtLeast(rs.version, 22, 18) && !versionAtLeast(rs.version, 23, 0)) {
			argv = append(argv, "--experimental-strip-types")
		}
		return append(append(argv, rc.main), rc.args...)
	},
	runHeadroom: 2 * gib,
}

// nodeFlags are the flags node needs to run main.js: module syntax
// detection where it is not yet the default (20.10 to 22.11), so that
// both CommonJS and ES module code runs.
func nodeFlags(version string) []string {
	if versionAtLeast(version, 20, 10) && !versionAtLeast(version, 22, 12) {
		return []string{"--experimental-detect-module"}
	}
	return nil
}

// dotnetCS builds a generated project with the .NET SDK, then runs the
// assembly. It is not exercised by the tests of this repository (the SDK
// is not in Debian).
var dotnetCS = &toolchain{
	name: "dotnet",
	lang: CSharp,
	script: prelude + `p=$(need dotnet) || exit 1
p=$(real "$p")
v=$("$p" --version) || exit 1
echo "$p"; echo "$v"`,
	setup: func(rs *resolved, rc *runContext) map[string]string {
		for _, f := range rc.files {
			if strings.HasSuffix(f, ".csproj") && !strings.Contains(f, "/") {
				return nil // the caller's own project
			}
		}
		major, _, _ := strings.Cut(rs.version, ".")
		return map[string]string{"main.csproj": `<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup>
    <OutputType>Exe</OutputType>
    <TargetFramework>net` + major + `.0</TargetFramework>
    <AssemblyName>main</AssemblyName>
    <ImplicitUsings>enable</ImplicitUsings>
    <Nullable>disable</Nullable>
    <InvariantGlobalization>true</InvariantGlobalization>
    <EnableDefaultCompileItems>true</EnableDefaultCompileItems>
    <DefaultItemExcludes>$(DefaultItemExcludes);out/**</DefaultItemExcludes>
  </PropertyGroup>
</Project>
`}
	},
	compile: func(rs *resolved, rc *runContext) []string {
		// No build servers: they would outlive the compile step.
		return append([]string{rs.path, "build", "-c", "Release", "-o", "out", "-nologo", "-v:q",
			"-nodeReuse:false", "-p:UseSharedCompilation=false"}, rc.compileFlags...)
	},
	run: func(rs *resolved, rc *runContext) []string {
		return append([]string{rs.path, "out/main.dll"}, rc.args...)
	},
	env: func(rs *resolved, rc *runContext) map[string]string {
		return map[string]string{
			"DOTNET_CLI_HOME":                   path.Join(rc.cacheDir, "dotnet"),
			"NUGET_PACKAGES":                    path.Join(rc.cacheDir, "nuget"),
			"DOTNET_NOLOGO":                     "1",
			"DOTNET_CLI_TELEMETRY_OPTOUT":       "1",
			"DOTNET_SKIP_FIRST_TIME_EXPERIENCE": "1",
			"DOTNET_CLI_USE_MSBUILD_SERVER":     "0",
			"MSBUILDDISABLENODEREUSE":           "1",
		}
	},
	// The CLR reserves 256 GiB for its GC regions.
	runHeadroom:     asOff,
	compileHeadroom: asOff,
}

// monoCS compiles with Mono's mcs and runs with mono.
var monoCS = &toolchain{
	name: "mono",
	lang: CSharp,
	script: prelude + `m=$(need mono) || exit 1
c=$(command -v mcs 2>/dev/null) || { echo "mcs (the Mono C# compiler) not found in PATH" >&2; exit 1; }
m=$(real "$m")
echo "$m"
"$m" --version | { read -r l; echo "$l"; }
echo "$c"`,
	nExtra: 1,
	check: func(rs *resolved) error {
		// "Mono JIT compiler version 6.8.0.105 (Debian ...)"
		if _, v, ok := strings.Cut(rs.version, "version "); ok {
			rs.version, _, _ = strings.Cut(v, " ")
		}
		return nil
	},
	compile: func(rs *resolved, rc *runContext) []string {
		return append([]string{rs.extra[0], "-out:main.exe", "-optimize+", "-debug",
			"-r:System.Numerics.dll", "-recurse:*.cs"}, rc.compileFlags...)
	},
	run: func(rs *resolved, rc *runContext) []string {
		return append([]string{rs.path, "--debug", "main.exe"}, rc.args...)
	},
	runHeadroom:     512 * mib,
	compileHeadroom: 512 * mib,
}

var bashTC = &toolchain{
	name: "bash",
	lang: Bash,
	script: prelude + `p=$(need bash) || exit 1
echo "$p"; "$p" -c 'echo "$BASH_VERSION"'`,
	run: func(rs *resolved, rc *runContext) []string {
		return append([]string{rs.path, rc.main}, rc.args...)
	},
	runHeadroom: 256 * mib,
}

var shTC = &toolchain{
	name: "sh",
	lang: Sh,
	// A POSIX shell has no version flag: the version is what sh is.
	script: prelude + `p=$(need sh) || exit 1
echo "$p"; r=$(real "$p"); echo "${r##*/}"`,
	run: func(rs *resolved, rc *runContext) []string {
		return append([]string{rs.path, rc.main}, rc.args...)
	},
	runHeadroom: 256 * mib,
}

var goTC = &toolchain{
	name: "go",
	lang: Go,
	// GOTOOLCHAIN=local (set for probes) keeps go from fetching another
	// toolchain; GOROOT/bin/go is the real binary behind any wrapper.
	script: prelude + `p=$(need go) || exit 1
r=$("$p" env GOROOT) || exit 1
v=$("$p" env GOVERSION) || exit 1
echo "$r/bin/go"; echo "${v#go}"`,
	setup: func(rs *resolved, rc *runContext) map[string]string {
		for _, f := range rc.files {
			if f == "go.mod" {
				return nil
			}
		}
		// Module mode builds every .go file of the directory; the go line
		// selects the toolchain's own language version.
		return map[string]string{"go.mod": "module main\n\ngo " + majorMinor(rs.version) + "\n"}
	},
	compile: func(rs *resolved, rc *runContext) []string {
		return append(append([]string{rs.path, "build", "-o", "main"}, rc.compileFlags...), ".")
	},
	run: func(rs *resolved, rc *runContext) []string {
		return append([]string{path.Join(rc.dir, "main")}, rc.args...)
	},
	env: func(rs *resolved, rc *runContext) map[string]string {
		return map[string]string{
			"GOCACHE":     path.Join(rc.cacheDir, "go-build"),
			"GOPATH":      path.Join(rc.cacheDir, "go"),
			"GOTOOLCHAIN": "local",
			// The workspace may be a repository go cannot stamp.
			"GOFLAGS": "-buildvcs=false",
		}
	},
	runHeadroom:     1 * gib,
	compileHeadroom: 1 * gib,
}

// gccTC and gxxTC compile with -O2 and link libm.
var gccTC = &toolchain{
	name: "gcc",
	lang: C,
	script: prelude + `p=$(need gcc) || exit 1
echo "$p"; "$p" -dumpfullversion`,
	compile: func(rs *resolved, rc *runContext) []string {
		return cCompile(rs, rc, ".c")
	},
	run: func(rs *resolved, rc *runContext) []string {
		return append([]string{path.Join(rc.dir, "main")}, rc.args...)
	},
	runHeadroom:     256 * mib,
	compileHeadroom: 512 * mib,
}

var gxxTC = &toolchain{
	name: "g++",
	lang: CPP,
	script: prelude + `p=$(need g++) || exit 1
echo "$p"; "$p" -dumpfullversion`,
	compile: func(rs *resolved, rc *runContext) []string {
		return cCompile(rs, rc, ".cpp", ".cc", ".cxx")
	},
	run:             gccTC.run,
	runHeadroom:     256 * mib,
	compileHeadroom: 512 * mib,
}

// cCompile compiles the main file and the request's files with one of exts.
func cCompile(rs *resolved, rc *runContext, exts ...string) []string {
	argv := append([]string{rs.path, "-O2", "-o", "main"}, rc.compileFlags...)
	argv = append(argv, rc.main)
	for _, f := range rc.files {
		for _, e := range exts {
			if strings.HasSuffix(f, e) {
				argv = append(argv, f)
				break
			}
		}
	}
	return append(argv, "-lm")
}

// versionAtLeast reports whether a dotted version is at least major.minor.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	ma, err := strconv.Atoi(parts[0])
	if err != nil {
		return false
	}
	mi := 0
	if len(parts) > 1 {
		m := parts[1]
		if i := strings.IndexFunc(m, notDigit); i >= 0 {
			m = m[:i]
		}
		mi, _ = strconv.Atoi(m)
	}
	return ma > major || ma == major && mi >= minor
}

// majorMinor returns "1.26" of "1.26.8" (or of "1.26rc1").
func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	minor := parts[1]
	if i := strings.IndexFunc(minor, notDigit); i >= 0 {
		minor = minor[:i]
	}
	return parts[0] + "." + minor
}

func notDigit(r rune) bool { return r < '0' || r > '9' }
