package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
)

// TestPolicyCodeAndGit: code runs and the git operations that change
// something are asked about (the token of a push never shown to the
// policy); a denial stops them; git's reads are asked about too (they
// run programs the repository's config names: TestRedTeamGitReadRunsRepoPrograms).
func TestPolicyCodeAndGit(t *testing.T) {
	testutil.Require(t, gitDep, testutil.Command("python3"))
	origin := originRepo(t, t.TempDir(), "origin.git")
	var mu sync.Mutex
	var seen []*api.PolicyAction
	policy := server.PolicyFunc(func(ctx context.Context, a *api.PolicyAction) (api.PolicyDecision, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, a)
		if a.Code != nil && strings.Contains(a.Code.Source, "forbidden") {
			return api.PolicyDecision{Reason: "no forbidden code"}, nil
		}
		if a.Kind == "git.commit" {
			return api.PolicyDecision{Reason: "commits need review"}, nil
		}
		return api.PolicyDecision{Allow: true}, nil
	})
	e := newEnv(t, server.Options{Policy: policy})
	sb, ws := e.policySandbox(`{}`)

	if r := e.json("POST", sb+"code", `{"language":"python","source":"print(6*7)"}`); r.status != 200 || !strings.Contains(string(r.body), `"42\n"`) {
		t.Errorf("allowed code run: %d %s", r.status, r.body)
	}
	policyWantDenied(t, "code run", e.json("POST", sb+"code", `{"language":"python","source":"open('out','w') # forbidden"}`), "no forbidden code")
	policyNoFile(t, ws, "out", "denied code run")

	clone := `{"url":"` + origin + `","path":"app","credentials":{"url":"https://git.example.com/team/app.git","token":"s3cret-token"}}`
	if rep := gitReply(t, "clone", e.json("POST", sb+"git/clone", clone)); rep.Error != nil {
		t.Fatalf("clone: %+v", rep.Error)
	}
	if err := os.WriteFile(filepath.Join(ws, "app", "x.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitReply(t, "status", e.json("POST", sb+"git/status", `{"dir":"app"}`))
	policyWantDenied(t, "git commit", e.json("POST", sb+"git/commit", `{"dir":"app","message":"m","all":true,`+identity+`}`), "commits need review")
	if st := gitReply(t, "status", e.json("POST", sb+"git/status", `{"dir":"app"}`)).Status; st == nil || len(st.Untracked) != 1 {
		t.Errorf("after the denied commit: status %+v, want x.txt still untracked", st)
	}

	mu.Lock()
	defer mu.Unlock()
	var kinds []string
	for _, a := range seen {
		kinds = append(kinds, string(a.Kind))
		if a.Kind == "git.clone" {
			req := string(a.Git.Request)
			if strings.Contains(req, "s3cret") || !strings.Contains(req, `"url":"https://git.example.com/team/app.git"`) {
				t.Errorf("git.clone action's request: %s, want the URL and no token", req)
			}
		}
	}
	if got, want := strings.Join(kinds, " "), "create code.run code.run git.clone git.status git.commit git.status"; got != want {
		t.Errorf("kinds asked: %q, want %q", got, want)
	}
}
