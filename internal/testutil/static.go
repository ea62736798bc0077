package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	bin := filepath.Join(dir, "execbox-static")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/execbox")
	cmd.Dir = filepath.Dir(mod)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build a static execbox: %v: %s", err, stderr.Bytes())
	}
	return bin, nil
}
