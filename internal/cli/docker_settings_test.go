package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
)

// TestDockerSettingsTakeUnits is issue 23's newcomer friction: the docker
// runtime's sizes took only numbers of bytes ("128MiB" was a type
// error), --network bridge was refused though the README gives it for
// docker, and --memory on docker did not say where a container's cap is
// set.
func TestDockerSettingsTakeUnits(t *testing.T) {
	testutil.Require(t, testutil.Root, testutil.Docker, testutil.StaticAgent, testutil.Command("docker"))
	file := filepath.Join(t.TempDir(), "execbox.yaml")
	yaml := "runtime: docker\nruntimes:\n  docker:\n    memory: 128MiB\n    workspace_size: 64MiB\n" + dockerSettings(t)
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; ls /sys/class/net; grep ' /workspace ' /proc/mounts`
	o := mainRun(t, nil, nil, "exec", "--config", file, "--runtime", "docker", "--temp-workspace", "--network", "bridge", "--", "sh", "-c", script)
	if o.code != 0 {
		t.Fatalf("exit code %d: %s", o.code, o.stderr)
	}
	lines := strings.Fields(o.stdout)
	if len(lines) == 0 || lines[0] != "134217728" {
		t.Errorf("the container's memory cap: %q, want 134217728 (128MiB)", o.stdout)
	}
	if !strings.Contains(o.stdout, "eth0") {
		t.Errorf("--network bridge: interfaces %q, want eth0 beside lo", o.stdout)
	}
	if !strings.Contains(o.stdout, "size=65536k") {
		t.Errorf("workspace_size 64MiB: mount %q, want size=65536k", o.stdout)
	}

	o = mainRun(t, nil, nil, "exec", "--config", file, "--runtime", "docker", "--temp-workspace", "--memory", "1GiB", "--", "true")
	if o.code == 0 || !strings.Contains(o.stderr, "--memory: not supported by the docker runtime per sandbox or command: set each container's cap with runtimes.docker.memory") {
		t.Errorf("--memory on docker: code %d, stderr %q; want it to name runtimes.docker.memory", o.code, o.stderr)
	}
}

// TestDevcontainerSizesTakeUnits: runtimes.devcontainer.memory takes
// units like every other size.
func TestDevcontainerSizesTakeUnits(t *testing.T) {
	file := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(file, []byte("runtimes:\n  devcontainer:\n    memory: 1GiB\n  docker:\n    memory: 1.5G\n    workspace_size: 512M\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := mainRun(t, nil, nil, "exec", "--config", file, "--temp-workspace", "--runtime", "local", "--", "true")
	if o.code != 0 {
		t.Errorf("sizes with units in runtimes.devcontainer and runtimes.docker: code %d, stderr %q", o.code, o.stderr)
	}
	// In use, the devcontainer runtime's sizes are taken: what stops it
	// here is something else (no devcontainer.json).
	o = mainRun(t, nil, nil, "exec", "--config", file, "--temp-workspace", "--runtime", "devcontainer", "--", "true")
	if strings.Contains(o.stderr, "runtimes.devcontainer.memory") || strings.Contains(o.stderr, "runtimes.devcontainer.workspace_size") {
		t.Errorf("runtimes.devcontainer.memory 1GiB refused: %q", o.stderr)
	}
	o = mainRun(t, nil, nil, "exec", "--config", file, "--temp-workspace", "--runtime", "devcontainer", "--workspace-size", "1GiB", "--", "true")
	if o.code != ExitUsage && o.code != ExitFailure || !strings.Contains(o.stderr, "--workspace-size: not supported by the devcontainer runtime") {
		t.Errorf("--workspace-size on devcontainer: code %d, stderr %q; want it refused naming the flag", o.code, o.stderr)
	}
	o = mainRun(t, nil, nil, "exec", "--config", file, "--temp-workspace", "--runtime", "local", "--network", "none", "--", "true")
	if o.code != ExitUsage || o.stderr != "execbox: --network: not supported by the local runtime\n" {
		t.Errorf("--network on local: code %d, stderr %q; want it refused naming the flag", o.code, o.stderr)
	}
}
