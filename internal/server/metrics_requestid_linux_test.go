package server_test

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// TestRequestIDToAgent: the request ID of a call to a server of the
// sandbox runtime reaches the agent inside the boundary, which logs it;
// the agent's log reaches the runtime's Logger (at debug, as "boundary"
// lines).
func TestRequestIDToAgent(t *testing.T) {
	testutil.Require(t, testutil.UserNamespaces, testutil.CgroupV1orV2)
	state, err := os.MkdirTemp("", "execbox-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	rec := newLogRecorder(slog.LevelDebug)
	rt := sandbox.New(sandbox.Options{Logger: slog.New(rec), StateDir: filepath.Join(state, "state")})
	if h := rt.Health(t.Context()); !h.Available {
		t.Fatalf("sandbox runtime unavailable on a machine with user namespaces and cgroups: %s", h.Detail)
	}
	srv, err := server.New([]execbox.Runtime{rt}, server.Options{Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	c, err := client.New(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	sb, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const id = "to-the-agent-7e2a"
	res, err := sb.Exec(api.WithRequestID(ctx, id), execbox.ExecRequest{Command: []string{"echo", "hi"}})
	if err != nil || res.Reason != execbox.ReasonExited {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	if l := rec.find("request", map[string]string{"request_id": id, "route": "POST /v1/sandboxes/{sandbox}/exec"}); len(l) != 1 {
		t.Errorf("%d server access log lines with the request ID, want 1", len(l))
	}
	// The agent's lines are relayed as they come: wait for its line.
	testutil.Eventually(t, 10*time.Second, func() bool {
		for _, r := range rec.find("boundary", nil) {
			var line map[string]any
			if json.Unmarshal([]byte(r.attrs["line"]), &line) != nil {
				continue
			}
			if line["msg"] == "request" && line["request_id"] == id && line["route"] == "POST /v1/exec" {
				return true
			}
		}
		return false
	}, "the agent's access log line with request ID %q", id)
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
}
