package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	cfg, _ := json.Marshal(server.AgentConfig{ID: "sb-cmd-test", Workspace: dir, Spec: execbox.Spec{Env: map[string]string{"X": "1"}}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--listen", "unix:" + sock, "--config", "-", "--runtime", "test", "--log-level", "debug"}, bytes.NewReader(cfg), &stderr)
	}()
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	var sb *client.Sandbox
	testutil.Eventually(t, 5*time.Second, func() bool {
		sb, err = c.Agent(t.Context())
		return err == nil
	}, "the agent to answer")
	if sb.ID() != "sb-cmd-test" || sb.Info().Runtime != "test" {
		t.Errorf("agent info %+v", sb.Info())
	}
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: `echo "$X"; pwd`})
	if err != nil || !strings.HasPrefix(string(res.Stdout.Data), "1\n") {
		t.Errorf("Exec = %q, %v", res.Stdout.Data, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v\n%s", err, stderr.String())
	}
}

func TestRunErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--listen", "fd:1"},
		{"--listen", "unix:" + filepath.Join(t.TempDir(), "s"), "--config", "/nonexistent.json"},
		{"--listen", "unix:" + filepath.Join(t.TempDir(), "s")}, // no id, no workspace
	} {
		if err := run(t.Context(), args, strings.NewReader(""), &bytes.Buffer{}); err == nil {
			t.Errorf("run %q: nil error", args)
		}
	}
}

// TestDependencies keeps the agent, which runs inside every boundary,
// small: no YAML, no Prometheus, no Docker SDK, no CLI.
func TestDependencies(t *testing.T) {
	testutil.Require(t, testutil.Command("go"))
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"yaml", "prometheus", "docker", "internal/cli", "internal/config"} {
			if strings.Contains(dep, banned) {
				t.Errorf("execbox-agent depends on %s", dep)
			}
		}
	}
}
