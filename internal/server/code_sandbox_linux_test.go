package server_test

import (
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// TestCodeGitSandboxRuntime: over the sandbox runtime, POST code and
// POST git/{op} are forwarded whole to the agent inside the boundary
// (its /v1/code and /v1/git/{op}), which runs them there.
func TestCodeGitSandboxRuntime(t *testing.T) {
	testutil.Require(t, testutil.UserNamespaces, testutil.CgroupV1orV2, python3, gitDep)
	state, err := os.MkdirTemp("", "execbox-state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	var logs syncLog
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt := sandbox.New(sandbox.Options{Logger: log, StateDir: filepath.Join(state, "state")})
	if h := rt.Health(t.Context()); !h.Available {
		t.Fatalf("sandbox runtime unavailable on a machine with user namespaces and cgroups: %s", h.Detail)
	}
	srv, err := server.New([]execbox.Runtime{rt}, server.Options{Logger: log})
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
	e := &env{t: t, srv: srv, ts: ts}
	sb := e.sandbox()

	res := codeResponse(t, "python", e.json("POST", sb+"code", `{"language":"python","source":"import os\nprint(os.getcwd(), input())","stdin":{"text":"in"}}`)).Result
	if res.Phase != "run" || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout.Text, sandbox.Workspace+"/"+res.Dir+" in") {
		t.Errorf("python in the sandbox: %+v", res)
	}
	if rep := gitReply(t, "init", e.json("POST", sb+"git/init", `{"path":"repo"}`)); rep.Dir != "repo" {
		t.Fatalf("init: %+v", rep)
	}
	if r := e.json("PUT", sb+"files?path=repo/a.txt", "a\n", "Content-Type", api.ContentBytes); r.status >= 300 {
		t.Fatalf("write: %d %s", r.status, r.body)
	}
	if st := gitReply(t, "status", e.json("POST", sb+"git/status", `{"dir":"repo"}`)).Status; st == nil || len(st.Untracked) != 1 {
		t.Errorf("status: %+v", st)
	}
	if rep := gitReply(t, "commit", e.json("POST", sb+"git/commit", `{"dir":"repo","message":"m","all":true,`+identity+`}`)); len(rep.Hash) != 40 {
		t.Errorf("commit: %+v", rep)
	}
	// The agent ran them: one request each reached it.
	for _, p := range []string{`\"path\":\"/v1/code\"`, `\"path\":\"/v1/git/status\"`, `\"path\":\"/v1/git/commit\"`} {
		if !strings.Contains(logs.String(), p) {
			t.Errorf("the agent's log has no request %s", p)
		}
	}
}
