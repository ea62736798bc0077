package agent_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/agent"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
)

func TestServe(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(t.TempDir(), "a.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	boot, err := agent.NewBoot("sb-agent-test", "sandbox", dir,
		execbox.Spec{Env: map[string]string{"FROM_SPEC": "yes"}}, execbox.Capabilities{Rlimits: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := boot.Config()
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- agent.Serve(ctx, ln, cfg, server.Options{Logger: testutil.Logger(t), Token: "x"}) }()
	c, _ := client.New("unix://"+sock, client.WithToken("x"))
	sb, err := c.Agent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID() != cfg.ID || sb.Info().Runtime != "sandbox" {
		t.Errorf("Agent: %+v", sb.Info())
	}
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: `echo "$FROM_SPEC"`})
	if err != nil || string(res.Stdout.Data) != "yes\n" {
		t.Errorf("Exec = %q, %v", res.Stdout.Data, err)
	}
	_, err = sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}, Limits: execbox.Limits{Memory: 1 << 20}})
	if !errors.Is(err, execbox.ErrUnsupported) {
		t.Errorf("Exec with a memory limit the agent lacks: %v, want ErrUnsupported", err)
	}
	p, err := sb.Start(t.Context(), execbox.ExecRequest{Command: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	_ = p // the agent killed it; its processes die with the sandbox
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the agent removed its workspace: %v", err)
	}
}

func TestBootErrors(t *testing.T) {
	_, err := agent.Boot{}.Config()
	for _, field := range []string{"id", "workspace"} {
		var fe *execbox.FieldError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), field) {
			t.Errorf("Boot{}.Config() = %v, want an error naming %s", err, field)
		}
	}
	b := agent.Boot{ID: "x", Workspace: t.TempDir()}
	b.Spec.EnvPolicy = "bogus"
	if _, err := b.Config(); err == nil || !strings.Contains(err.Error(), "spec") {
		t.Errorf("Config with a bad spec = %v, want an error naming spec", err)
	}
}

// TestDependencies keeps the agent small, in every form it runs: the
// standalone binary, and the packages a runtime re-executes inside its
// boundary: no YAML, no Prometheus, no Docker SDK, no CLI.
func TestDependencies(t *testing.T) {
	testutil.Require(t, testutil.Command("go"))
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{".", "../../cmd/execbox-agent", "../../runtimes/sandbox"} {
		out, err := exec.Command(goBin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, banned := range []string{"yaml", "prometheus", "github.com/docker/docker", "github.com/moby/moby", "internal/cli", "internal/config"} {
				if strings.Contains(dep, banned) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
