//go:build integration

package integration

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
)

// ContainerFlags are the least privilege `execbox serve` needs to run
// sandboxes inside a Docker container; the README's table of host kinds
// explains each.
var ContainerFlags = []string{
	"--cap-add", "SYS_ADMIN", // namespaces, mounts, idmapped workspace, remount of its own cgroup
	"--cgroupns", "private", // its own cgroup as a subtree it may write
	"--security-opt", "seccomp=unconfined", // Docker's profile refuses pivot_root, open_tree, mount_setattr
	"--security-opt", "systempaths=unconfined", // a masked /proc cannot be mounted again in a sandbox
	"--tmpfs", "/tmp", // temporary workspaces on a file system that supports idmapped mounts
}

// TestServeInContainer runs `execbox serve` inside a real Docker
// container with ContainerFlags, and execs through it from the host with
// the remote runtime: the commands must run in the container's sandbox
// runtime, isolated (no capabilities, no_new_privs, the command user).
func TestServeInContainer(t *testing.T) {
	testutil.Require(t, testutil.Root, testutil.Docker, testutil.Command("docker"))
	image := importImage(t)
	sockDir := t.TempDir()
	token := randomHex(t)
	name := "execbox-it-" + randomHex(t)[:12]
	args := append([]string{"run", "-d", "--name", name, "--label", "execbox.test=integration",
		"--network", "none", "-e", "EXECBOX_TOKEN=" + token,
		"-v", "/usr:/usr:ro", "-v", binary + ":/execbox:ro", "-v", sockDir + ":/sock"},
		ContainerFlags...)
	args = append(args, image, "/execbox", "serve", "--runtime", "sandbox", "--listen", "unix:/sock/execbox.sock")
	docker(t, args...)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "logs", name).CombinedOutput()
			t.Logf("container logs:\n%s", out)
		}
		exec.Command("docker", "rm", "-f", name).Run()
	})
	sock := filepath.Join(sockDir, "execbox.sock")
	testutil.Eventually(t, 60*time.Second, func() bool {
		_, err := os.Stat(sock)
		return err == nil
	}, "the server's socket %s", sock)

	cfg := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(cfg, []byte("runtimes:\n  remote:\n    url: unix://"+sock+"\n    token_env: EXECBOX_IT_TOKEN\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EXECBOX_IT_TOKEN", token)
	stdout, _, code := run(t, "exec", "--config", cfg, "--runtime", "remote", "--temp-workspace", "--",
		"sh", "-c", "id -u; grep -E '^(NoNewPrivs|CapEff):' /proc/self/status; pwd")
	if code != 0 {
		t.Fatalf("exec through the containerised server: exit %d", code)
	}
	for _, want := range []string{"1000\n", "NoNewPrivs:\t1", "CapEff:\t0000000000000000", "/workspace\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output %q lacks %q: the command did not run in the sandbox runtime", stdout, want)
		}
	}
}

// importImage makes a minimal image with `docker import`: no registry is
// reachable, and the host's /usr is mounted read-only at run time.
func importImage(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"etc", "tmp", "proc", "sys", "dev", "run", "root", "sock"} {
		tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755})
	}
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		tw.WriteHeader(&tar.Header{Name: l, Typeflag: tar.TypeSymlink, Linkname: "usr/" + l, Mode: 0o777})
	}
	for name, body := range map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n"} {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	image := "execbox-it:" + randomHex(t)[:12]
	cmd := exec.Command("docker", "import", "-", image)
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", image).Run() })
	return image
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func randomHex(t *testing.T) string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
