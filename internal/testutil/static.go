package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// StaticExecbox builds, once per test binary, a statically linked execbox
// (CGO_ENABLED=0, as make build does) from this module's ./cmd/execbox
// into dir, and returns its path: what a sandbox made from an image runs
// its init and agent from when the test binary itself is dynamically
// linked (sandbox.Options.AgentBinary). dir must outlive every caller,
// e.g. a directory TestMain makes and removes. With
// EXECBOX_TEST_AGENT_BINARY set, that binary is used instead (a machine
// without the Go toolchain, such as the VM matrix's guest).
func StaticExecbox(dir string) (string, error) {
	staticOnce.Do(func() {
		if p := os.Getenv("EXECBOX_TEST_AGENT_BINARY"); p != "" {
			staticPath = p
			return
		}
		staticPath, staticErr = buildStatic(dir)
	})
	return staticPath, staticErr
}

var (
	staticOnce sync.Once
	staticPath string
	staticErr  error
)

// StaticAgent is the dependency on a static execbox for image sandboxes:
// the Go toolchain to build one, or EXECBOX_TEST_AGENT_BINARY.
var StaticAgent = NewDep("static-agent", func() error {
	if os.Getenv("EXECBOX_TEST_AGENT_BINARY") != "" {
		return nil
	}
	_, err := exec.LookPath("go")
	return err
})

func buildStatic(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the execbox module")
	}
	return goBuildStatic(filepath.Dir(mod), filepath.Join(dir, "execbox-static"), "./cmd/execbox")
}

// goBuildStatic builds pkg of the module at root into bin with
// CGO_ENABLED=0.
func goBuildStatic(root, bin, pkg string) (string, error) {
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s statically: %v: %s", pkg, err, stderr.Bytes())
	}
	return bin, nil
}

// StreamGen builds the static streamgen command
// (internal/testutil/streamgen) into a temporary directory of tb's and
// returns its path: it writes the known streams of package streams, in
// any sandbox, container or image. Go's build cache makes every build
// after the first one quick.
func StreamGen(tb testing.TB) string {
	tb.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		tb.Fatalf("go env GOMOD: %v", err)
	}
	bin, err := goBuildStatic(filepath.Dir(strings.TrimSpace(string(out))), filepath.Join(tb.TempDir(), "streamgen"), "./internal/testutil/streamgen")
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}
