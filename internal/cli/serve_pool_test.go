package cli

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/testutil"
)

// TestServePoolFromConfig: execbox serve starts the pools of its config
// file; a create naming one gets a warm sandbox made by the template's
// setup, with the take's env.
func TestServePoolFromConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "execbox.yaml")
	if err := os.WriteFile(cfg, []byte(`server:
  pools:
    - name: warm
      min_idle: 2
      max: 4
      spec:
        env: {FROM: template}
        setup:
          - shell: echo prepared > ready.txt
`), 0o644); err != nil {
		t.Fatal(err)
	}
	url, _ := startServe(t, "--config", cfg, "--runtime", "local", "--listen", "127.0.0.1:0", "--no-auth")
	c, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	testutil.Eventually(t, 30*time.Second, func() bool {
		st, err := c.Pool(ctx, "warm")
		return err == nil && st.Idle == 2
	}, "pool warm to fill")
	sb, err := c.Create(ctx, execbox.Spec{Pool: "warm", Env: map[string]string{"LATE": "yes"}}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, execbox.ExecRequest{Shell: "cat ready.txt; echo $FROM $LATE"})
	if err != nil || res.Stdout.Text() != "prepared\ntemplate yes\n" {
		t.Errorf("exec in a warm sandbox: %q %v", res.Stdout.Text(), err)
	}
	if l, err := c.Pools(ctx); err != nil || len(l) != 1 || l[0].Hits != 1 || l[0].HandedOut != 1 || l[0].Max != 4 {
		t.Errorf("Pools = %+v, %v", l, err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	// The pool's gauges and its takes' latency, at /metrics.
	metrics := get(t, url+"/metrics")
	for _, want := range []string{`execbox_pool_max_sandboxes{pool="warm"} 4`, `execbox_pool_desired_sandboxes{pool="warm"} 2`,
		`execbox_pool_acquire_duration_seconds_count{pool="warm",result="hit"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if _, err := c.DefinePool(ctx, api.Pool{Name: "more", MinIdle: 1}); err != nil {
		t.Errorf("DefinePool: %v", err)
	}
	if err := c.DeletePool(ctx, "more"); err != nil {
		t.Errorf("DeletePool: %v", err)
	}
}

// TestServePoolConfigErrors: a bad pool stops execbox serve with the
// line and key at fault, as does a runtime the server does not have.
func TestServePoolConfigErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"server:\n  pools:\n    - name: p\n      min_idle: -1\n", "c.yaml:4: server.pools[0].min_idle: must not be negative"},
		{"server:\n  pools:\n    - name: p\n    - name: q\n      runtime: docker\n", `c.yaml:5: server.pools[1].runtime: this server has no runtime "docker"`},
	} {
		cfg := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(cfg, []byte(c.file), 0o644); err != nil {
			t.Fatal(err)
		}
		o := mainRun(t, nil, nil, "serve", "--config", cfg, "--runtime", "local", "--listen", "127.0.0.1:0", "--no-auth")
		if o.code == 0 || !strings.Contains(o.stderr, c.want) {
			t.Errorf("serve with %q: code %d, stderr %q; want %s", c.file, o.code, o.stderr, fmt.Sprintf("%q", c.want))
		}
	}
}

// get returns the body of a GET of url, failing t unless it is 200.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", url, resp.StatusCode, b, err)
	}
	return string(b)
}
