package staticbin

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox/internal/hostpath"
	"golang.org/x/sys/unix"
)

// ModulePath is the module whose ./cmd/execbox Agent builds.
const ModulePath = "github.com/execbox/execbox"

// ErrNoToolchain is what Agent returns, wrapped, when this program is
// dynamically linked and no static agent can be built for it: no go
// command, or no source of the execbox module it was built from.
var ErrNoToolchain = errors.New("no static agent and none can be built")

// Agent returns a statically linked execbox that a sandbox's init and
// agent run from inside an image's root or a container, where the host's
// dynamic loader and C library are not: this program when it is static;
// else a build of ./cmd/execbox with CGO_ENABLED=0 from the execbox
// module this program was built from, made once and cached in CacheDir
// under this program's Go build ID, so that `go run`, `go build` and
// `go install …@latest` binaries run images and containers without a
// special build. The first build takes as long as a go build (it is
// logged at Warn, since a command waits for it); later calls, in this
// process or another, find it. Concurrent builders wait for one another
// (a lock file); cancelling ctx stops the build and caches nothing.
//
// The source is the module's directory this package was compiled from
// (a source tree, or the module cache after go install), else, for a
// -trimpath build, the module cache at the version the program records
// (go mod download, which fetches it if it is missing, as go install
// did). An error wraps ErrNoToolchain when there is no go command or no
// source; it says what to do instead.
func Agent(ctx context.Context, log *slog.Logger) (string, error) {
	agentMu.Lock()
	defer agentMu.Unlock()
	if agentPath != "" {
		return agentPath, nil
	}
	self, err := executable()
	if err != nil {
		return "", err
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	p, err := agentFor(ctx, self, dir, log)
	if err != nil {
		return "", err
	}
	agentPath = p
	return p, nil
}

var (
	agentMu   sync.Mutex
	agentPath string // what Agent found, once it succeeded
)

// Lookup is what Agent would return without building anything: the
// static program, when this one is static or its agent is cached
// (built true); "" when Agent would build one (a go command and the
// module's source are there); or the error Agent would return at once.
// Health reports use it: it takes no time and fetches nothing.
func Lookup() (path string, err error) {
	self, err := executable()
	if err != nil {
		return "", err
	}
	if interp, err := Interpreter(self); err != nil || interp == "" {
		return self, err
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	key, err := buildKey(self)
	if err != nil {
		return "", err
	}
	if p := cachedPath(dir, key); isStatic(p) {
		return p, nil
	}
	if _, err := goCommand(); err != nil {
		return "", noToolchain(self, err)
	}
	if _, err := sourceHint(); err != nil {
		return "", noToolchain(self, err)
	}
	return "", nil
}

// CacheDir is where Agent keeps its builds: hostpath.CacheDir("agent"),
// outside any home directory for root because a sandbox's init, an
// unprivileged host uid, starts the program from there.
func CacheDir() (string, error) { return hostpath.CacheDir("agent") }

// executable is this program's file, symbolic links resolved.
func executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this program: %w", err)
	}
	return filepath.EvalSymlinks(exe)
}

// agentFor is Agent for the program self, caching in dir.
func agentFor(ctx context.Context, self, dir string, log *slog.Logger) (string, error) {
	interp, err := Interpreter(self)
	if err != nil {
		return "", fmt.Errorf("%s: %w", self, err)
	}
	if interp == "" {
		return self, nil
	}
	key, err := buildKey(self)
	if err != nil {
		return "", err
	}
	final := cachedPath(dir, key)
	if isStatic(final) {
		return final, nil
	}
	goCmd, err := goCommand()
	if err != nil {
		return "", noToolchain(self, err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", fmt.Errorf("static agent cache: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, key+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if isStatic(final) { // another process built it meanwhile
		return final, nil
	}
	src, err := moduleDir(ctx, goCmd)
	if err != nil {
		return "", noToolchain(self, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log.Warn("this program is dynamically linked: building a static execbox once, for images and containers (CGO_ENABLED=0 go build ./cmd/execbox)",
		"interpreter", interp, "source", src, "cache", final)
	start := time.Now()
	if err := build(ctx, goCmd, src, self, final); err != nil {
		return "", err
	}
	log.Info("static agent built", "path", final, "duration", time.Since(start).Round(time.Millisecond))
	return final, nil
}

// noToolchain is the error of a dynamic program with no way to a static
// agent: err says why, and the rest what to do.
func noToolchain(self string, err error) error {
	return fmt.Errorf("%s is dynamically linked, and the agent it starts in an image or a container needs a static build: "+
		"building one needs the go command and the execbox module's source (%v); "+
		"install Go, or use a static execbox (make build, or CGO_ENABLED=0 go build ./cmd/execbox), or set agent_binary to one: %w",
		self, err, ErrNoToolchain)
}

// cachedPath is the agent built for the program whose key is key.
func cachedPath(dir, key string) string { return filepath.Join(dir, key, "execbox") }

// isStatic reports whether path is a static ELF program.
func isStatic(path string) bool {
	interp, err := Interpreter(path)
	return err == nil && interp == ""
}

// buildKey names a program's agent: its Go build ID (which changes with
// any source, flag or toolchain change) hashed, with the host's
// platform; the file's hash when it has no build ID.
func buildKey(path string) (string, error) {
	id, err := goBuildID(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	h := sha256.New()
	if id != "" {
		io.WriteString(h, id)
	} else {
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if _, err := io.Copy(h, f); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
	}
	return runtime.GOOS + "-" + runtime.GOARCH + "-" + hex.EncodeToString(h.Sum(nil))[:32], nil
}

// goBuildID is the build ID in the ELF note the Go linker writes
// (.note.go.buildid: name "Go", type 4), "" when there is none.
func goBuildID(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := f.Section(".note.go.buildid")
	if s == nil {
		return "", nil
	}
	b, err := s.Data()
	if err != nil {
		return "", err
	}
	return parseNote(b, f.ByteOrder)
}

// parseNote is the description of the one ELF note in b: namesz,
// descsz and type, then the name and the description, each padded to 4
// bytes.
func parseNote(b []byte, order binary.ByteOrder) (string, error) {
	if len(b) < 12 {
		return "", fmt.Errorf(".note.go.buildid of %d bytes", len(b))
	}
	namesz, descsz := uint64(order.Uint32(b)), uint64(order.Uint32(b[4:]))
	off := 12 + (namesz+3)&^3
	if off > uint64(len(b)) || descsz > uint64(len(b))-off {
		return "", fmt.Errorf(".note.go.buildid: a name of %d bytes and a description of %d past the section's %d", namesz, descsz, len(b))
	}
	return string(b[off : off+descsz]), nil
}

// goCommand is the go command in PATH.
func goCommand() (string, error) {
	p, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("no go command in PATH")
	}
	return p, nil
}

// lockFile takes an exclusive lock on path (created if need be), polling
// so that ctx can end the wait; the function returned releases it.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("static agent cache: %w", err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// build builds ./cmd/execbox in src, static, for this host, into a
// temporary file beside final that becomes final once it proved static
// and of the same revision as self.
func build(ctx context.Context, goCmd, src, self, final string) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := final + ".tmp-" + hex.EncodeToString(rnd[:])
	defer os.Remove(tmp)
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-o", tmp, "./cmd/execbox")
	cmd.Dir = src
	// Later entries win: the agent is for this host, whatever the
	// caller's environment cross-compiles for.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("build a static execbox (CGO_ENABLED=0 go build ./cmd/execbox in %s): %v: %s", src, err, bytes.TrimSpace(out.Bytes()))
	}
	if !isStatic(tmp) {
		return fmt.Errorf("build a static execbox in %s: the result is dynamically linked (GOFLAGS=%q?)", src, os.Getenv("GOFLAGS"))
	}
	if err := sameRevision(self, tmp, src); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, final)
}

// sameRevision refuses an agent built from another commit than self
// (a source tree checked out elsewhere since self was built), when both
// record one: the host and the agent speak one protocol version.
func sameRevision(self, built, src string) error {
	a, b := vcsRevision(self), vcsRevision(built)
	if a != "" && b != "" && a != b {
		return fmt.Errorf("the source at %s is at revision %s, but this program was built at %s: rebuild execbox (go build ./cmd/execbox), or use a static build: %w",
			src, b, a, ErrNoToolchain)
	}
	return nil
}

// vcsRevision is the vcs.revision a Go program records, "" if none.
func vcsRevision(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}

// sourceHint is where the module's source is, or how it will be found,
// without fetching anything: the directory this package was compiled
// from, or the module and version this program records.
func sourceHint() (string, error) {
	if dir := compiledDir(); dir != "" {
		return dir, nil
	}
	m, err := recordedModule()
	if err != nil {
		return "", err
	}
	return m.Path + "@" + m.Version, nil
}

// moduleDir is the execbox module's source: the directory this package
// was compiled from, else the module cache's copy of the version this
// program records (go mod download).
func moduleDir(ctx context.Context, goCmd string) (string, error) {
	if dir := compiledDir(); dir != "" {
		return dir, nil
	}
	m, err := recordedModule()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, goCmd, "mod", "download", "-json", m.Path+"@"+m.Version)
	cmd.Dir = os.TempDir() // outside any module
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); err != nil || jerr != nil || dl.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s %s", m.Path, m.Version, err, dl.Error, bytes.TrimSpace(stderr.Bytes()))
	}
	if !isModule(dl.Dir) {
		return "", fmt.Errorf("go mod download %s@%s: %s is not the module's source", m.Path, m.Version, dl.Dir)
	}
	return dl.Dir, nil
}

// compiledDir is the module root this file was compiled in, if it still
// holds the module (a build without -trimpath records the path); "".
func compiledDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	dir := filepath.Dir(filepath.Dir(filepath.Dir(file))) // <root>/internal/staticbin/agent.go
	if !isModule(dir) {
		return ""
	}
	return dir
}

// recordedModule is the execbox module (the main one or a dependency,
// replaced or not) and version this program records.
func recordedModule() (*debug.Module, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil, errors.New("this program records no build information")
	}
	m := &bi.Main
	if m.Path != ModulePath {
		m = nil
		for _, d := range bi.Deps {
			if d.Path == ModulePath {
				m = d
			}
		}
		if m == nil {
			return nil, fmt.Errorf("this program does not record the module %s", ModulePath)
		}
	}
	if m.Replace != nil {
		if m.Replace.Version == "" {
			return nil, fmt.Errorf("this program was built with %s replaced by the directory %s, and -trimpath: it records no path to its source", ModulePath, m.Replace.Path)
		}
		m = m.Replace
	}
	if m.Version == "" || m.Version == "(devel)" {
		return nil, errors.New("this program was built from a source tree with -trimpath, which records no path to it")
	}
	return m, nil
}

// isModule reports whether dir is the root of the execbox module with
// its ./cmd/execbox.
func isModule(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	if _, err := os.Stat(filepath.Join(dir, "cmd", "execbox")); err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == ModulePath
		}
	}
	return false
}
