package cli

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/testutil"
)

// TestServeLifetimes: execbox serve's server.*sandbox*timeout settings
// give sandboxes their default lifetimes and bound what clients ask or
// extend to; the reaper ends a sandbox whose lifetime ran out, killing
// what runs in it; the list filters by label.
func TestServeLifetimes(t *testing.T) {
	const tokenVar = "EXECBOX_TEST_SERVE_TOKEN"
	t.Setenv(tokenVar, "tok")
	t.Setenv("EXECBOX_SERVER_MAX_SANDBOX_IDLE_TIMEOUT", "20m")
	url, stop := startServe(t, "--listen", "127.0.0.1:0", "--token-env", tokenVar, "--runtime", "local",
		"--sandbox-timeout", "2s", "--max-sandbox-timeout", "1h", "--sandbox-idle-timeout", "10m")
	defer stop()
	ctx := t.Context()
	c, _ := client.New(url, client.WithToken("tok"))

	sb, err := c.Create(ctx, execbox.Spec{Labels: map[string]string{"job": "x"}}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := sb.Info()
	if !info.ExpiresAt.Equal(info.CreatedAt.Add(2*time.Second)) || info.IdleTimeoutMS != 600000 || info.State != api.StateRunning {
		t.Errorf("the defaults of --sandbox-timeout 2s, --sandbox-idle-timeout 10m: %+v", info)
	}
	var fe *execbox.FieldError
	for _, tt := range []struct {
		spec  execbox.Spec
		field string
	}{
		{execbox.Spec{Timeout: 2 * time.Hour}, "timeout"},
		{execbox.Spec{IdleTimeout: 30 * time.Minute}, "idle_timeout"},
	} {
		_, err := c.Create(ctx, tt.spec, client.CreateOptions{})
		if !errors.Is(err, execbox.ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("Create over the maximum %s: %v, want ErrInvalidArgument naming it", tt.field, err)
		}
	}
	other, err := c.Create(ctx, execbox.Spec{Timeout: 30 * time.Second}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.SetTimeout(ctx, 2*time.Hour); !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("extending past --max-sandbox-timeout: %v, want ErrInvalidArgument", err)
	}
	if got, err := other.SetTimeout(ctx, 10*time.Minute); err != nil || time.Until(got.ExpiresAt) < 9*time.Minute {
		t.Errorf("extending by 10m: %+v, %v", got, err)
	}
	if l, err := c.ListSandboxes(ctx, client.ListOptions{Labels: map[string]string{"job": "x"}}); err != nil || len(l) != 1 || l[0].ID != sb.ID() {
		t.Errorf("list with label job=x: %+v, %v", l, err)
	}

	pidFile := filepath.Join(t.TempDir(), "pid")
	if _, err := sb.Start(ctx, execbox.ExecRequest{Shell: "echo $$ > " + pidFile + "; exec sleep 300"}); err != nil {
		t.Fatal(err)
	}
	pid := testutil.WaitPIDFile(t, pidFile)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	testutil.Eventually(t, 30*time.Second, func() bool {
		info, err = c.SandboxInfo(ctx, sb.ID())
		return err == nil && info.State == api.StateClosed
	}, "the sandbox's lifetime to end it")
	if info.EndReason != api.EndTimeout {
		t.Errorf("ended: %+v", info)
	}
	testutil.Eventually(t, 30*time.Second, func() bool { return !testutil.Alive(pid) }, "the sleep to be killed")
	if _, err := sb.Exec(ctx, execbox.ExecRequest{Command: []string{"true"}}); !errors.Is(err, execbox.ErrClosed) || !strings.Contains(err.Error(), "lifetime") {
		t.Errorf("exec after the lifetime: %v, want ErrClosed saying so", err)
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d", code)
	}
}

// TestServeLifetimeSettings: bad lifetime settings stop execbox serve,
// naming the setting.
func TestServeLifetimeSettings(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--sandbox-timeout", "2h", "--max-sandbox-timeout", "1h"}, "--sandbox-timeout: 2h0m0s is over server.max_sandbox_timeout"},
		{[]string{"--max-sandbox-idle-timeout", "-1s"}, "--max-sandbox-idle-timeout: must not be negative"},
		{[]string{"--sandbox-idle-timeout", "soon"}, "--sandbox-idle-timeout"},
	} {
		o := mainRun(t, nil, nil, append([]string{"serve", "--config="}, tt.args...)...)
		if o.code != ExitUsage || !strings.Contains(o.stderr, tt.want) {
			t.Errorf("%v: code %d, stderr %q; want %d and %q", tt.args, o.code, o.stderr, ExitUsage, tt.want)
		}
	}
}
