package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/agent"
	"github.com/execbox/execbox/internal/testutil"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	boot, err := agent.NewBoot("sb-cmd-test", "", dir, execbox.Spec{Env: map[string]string{"X": "1"}}, execbox.Capabilities{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(boot)
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
