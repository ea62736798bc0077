package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox/internal/testutil"
)

// remoteConfig serves the local runtime on loopback and returns a
// configuration file whose remote runtime reaches it.
func remoteConfig(t *testing.T) string {
	t.Helper()
	const tokenVar = "EXECBOX_TEST_FRICTIONS_TOKEN"
	t.Setenv(tokenVar, "tok")
	url, _ := startServe(t, "--listen", "127.0.0.1:0", "--runtime", "local", "--token-env", tokenVar)
	cfgFile := filepath.Join(t.TempDir(), "execbox.yaml")
	if err := os.WriteFile(cfgFile, []byte("runtimes:\n  remote:\n    url: "+url+"\n    token: tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgFile
}

// TestExecNotFoundIsOneLine: a program that is not found, through a
// runtime behind the protocol (the sandbox's agent, a server), printed
// "execbox: not found" above the line that says what: the wire error's
// bare kind was split out as a problem of its own.
func TestExecNotFoundIsOneLine(t *testing.T) {
	cfgFile := remoteConfig(t)
	for _, runtime := range []string{"local", "remote"} {
		o := mainRun(t, nil, nil, "exec", "--config", cfgFile, "--runtime", runtime, "--temp-workspace", "--", "/no/such/prog")
		if o.code != ExitNotFound || o.stderr != "execbox: command[0]: \"/no/such/prog\" not found\n" {
			t.Errorf("%s: code %d, stderr %q; want %d and one line", runtime, o.code, o.stderr, ExitNotFound)
		}
	}
}

// TestRemoteDefaultWorkspaceHint: a server refuses the current directory
// that exec uses by default; the error says how to run anyway.
func TestRemoteDefaultWorkspaceHint(t *testing.T) {
	cfgFile := remoteConfig(t)
	o := mainRun(t, nil, nil, "exec", "--config", cfgFile, "--runtime", "remote", "--", "true")
	if o.code != ExitFailure || strings.Count(o.stderr, "\n") != 1 || !strings.Contains(o.stderr, "workspace: ") || !strings.Contains(o.stderr, "--temp-workspace") {
		t.Errorf("exec on a server with the default workspace: code %d, stderr %q; want one line suggesting --temp-workspace", o.code, o.stderr)
	}
	// A workspace the user chose is theirs to change: no hint.
	o = mainRun(t, nil, nil, "exec", "--config", cfgFile, "--runtime", "remote", "--workspace", t.TempDir(), "--", "true")
	if o.code != ExitFailure || strings.Contains(o.stderr, "--temp-workspace") {
		t.Errorf("exec on a server with --workspace: code %d, stderr %q; want no hint", o.code, o.stderr)
	}
}

// TestParallelRepoNamed: a --repo outside the workspace is named as
// --repo, not as a field ("dir") the user never set.
func TestParallelRepoNamed(t *testing.T) {
	testutil.Require(t, testutil.Command("git"))
	o := mainRun(t, nil, nil, "parallel", "--config=", "--runtime", "local", "--workspace", t.TempDir(), "--repo", "/nonexistent", "-n", "2", "--", "true")
	if o.code != ExitUsage || o.stderr != "execbox: --repo: \"/nonexistent\" is outside the workspace\n" {
		t.Errorf("parallel --repo outside: code %d, stderr %q", o.code, o.stderr)
	}
}
