package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox/internal/testutil"
)

// TestExecFromRootHomeRefused is the attack of issue 11: `execbox exec`
// run from root's home directory handed it to the sandbox read-write, and
// a command wrote root's dotfiles. The sandbox runtime refuses it (and
// any system directory) unless --allow-system-workspace.
func TestExecFromRootHomeRefused(t *testing.T) {
	testutil.Require(t, testutil.Root, testutil.UserNamespaces, testutil.CgroupV1orV2)
	dot := ".execbox-attack-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() { os.Remove(filepath.Join("/root", dot)) })
	// A state directory of the test's own.
	conf := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(conf, []byte("runtimes:\n  sandbox:\n    state_dir: "+filepath.Join(t.TempDir(), "state")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir("/root")
	o := mainRun(t, nil, nil, "exec", "--config="+conf, "--runtime=sandbox", "--", "sh", "-c", "echo pwned > "+dot)
	if o.code == 0 || !strings.Contains(o.stderr, "--allow-system-workspace") {
		t.Errorf("exec from /root: code %d, stderr %q; want refused, naming --allow-system-workspace", o.code, o.stderr)
	}
	if _, err := os.Lstat(filepath.Join("/root", dot)); err == nil {
		t.Errorf("a command wrote /root/%s", dot)
	}
	o = mainRun(t, nil, nil, "exec", "--config="+conf, "--runtime=sandbox", "--workspace=/etc", "--", "true")
	if o.code == 0 || !strings.Contains(o.stderr, "workspace") {
		t.Errorf("exec --workspace=/etc: code %d, stderr %q; want refused", o.code, o.stderr)
	}
}

// TestExecWorkspaceSize: --workspace-size caps a temporary workspace of
// the sandbox runtime; a command writing past it gets ENOSPC.
func TestExecWorkspaceSize(t *testing.T) {
	testutil.Require(t, testutil.Root, testutil.UserNamespaces, testutil.CgroupV1orV2)
	conf := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(conf, []byte("runtimes:\n  sandbox:\n    state_dir: "+filepath.Join(t.TempDir(), "state")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := mainRun(t, nil, nil, "exec", "--config="+conf, "--runtime=sandbox", "--temp-workspace", "--workspace-size=1M", "--", "sh", "-c", "head -c 2097152 /dev/zero > f")
	if o.code == 0 || !strings.Contains(o.stderr, "No space left") {
		t.Errorf("writing 2MiB with --workspace-size=1M: code %d, stderr %q; want ENOSPC", o.code, o.stderr)
	}
}
