package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/git"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
	"github.com/execbox/execbox/runtimes/remote"
)

var (
	gitDep = testutil.Command("git")
	// gitHTTPBackend is git's CGI server, which the token test pushes to.
	gitHTTPBackend = testutil.NewDep("git-http-backend", func() error {
		_, err := gitHTTPBackendPath()
		return err
	})
)

func gitHTTPBackendPath() (string, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "", err
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	_, err = os.Stat(backend)
	return backend, err
}

// hostGit runs git on the host, isolated from the user's config.
func hostGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// originRepo makes a bare repository on the host with one commit on
// main, under root.
func originRepo(t *testing.T, root, name string) string {
	t.Helper()
	bare := filepath.Join(root, name)
	hostGit(t, root, "init", "--quiet", "--bare", "--initial-branch=main", bare)
	work := t.TempDir()
	hostGit(t, work, "init", "--quiet", "--initial-branch=main")
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostGit(t, work, "add", "README")
	hostGit(t, work, "commit", "--quiet", "-m", "first")
	hostGit(t, work, "push", "--quiet", bare, "main")
	return bare
}

func gitReply(t *testing.T, what string, r response) api.GitReply {
	t.Helper()
	var out api.GitReply
	if r.status != http.StatusOK || json.Unmarshal(r.body, &out) != nil {
		t.Fatalf("%s: %d %s", what, r.status, r.body)
	}
	return out
}

const identity = `"identity":{"name":"Agent","email":"agent@example.com"}`

// TestGitEndpoints clones a local repository, then status, commit, diff
// and log through POST git/{op}; a git failure is data with its kind;
// bad requests name their fields.
func TestGitEndpoints(t *testing.T) {
	testutil.Require(t, gitDep)
	origin := originRepo(t, t.TempDir(), "origin.git")
	e := newEnv(t, server.Options{})
	sb := e.sandbox()

	rep := gitReply(t, "clone", e.json("POST", sb+"git/clone", `{"url":"`+origin+`","path":"app"}`))
	if rep.Dir != "app" || rep.Error != nil {
		t.Fatalf("clone: %+v", rep)
	}
	if r := e.json("PUT", sb+"files?path=app/new.txt", "new\n", "Content-Type", api.ContentBytes); r.status >= 300 {
		t.Fatalf("write: %d %s", r.status, r.body)
	}
	st := gitReply(t, "status", e.json("POST", sb+"git/status", `{"dir":"app"}`)).Status
	if st == nil || st.Branch != "main" || st.Upstream != "origin/main" || len(st.Untracked) != 1 || st.Untracked[0] != "new.txt" {
		t.Errorf("status: %+v", st)
	}
	rep = gitReply(t, "commit", e.json("POST", sb+"git/commit", `{"dir":"app","message":"add new","all":true,`+identity+`}`))
	if len(rep.Hash) != 40 {
		t.Errorf("commit: %+v", rep)
	}
	d := gitReply(t, "diff", e.json("POST", sb+"git/diff", `{"dir":"app","from":"HEAD~1","to":"HEAD"}`)).Diff
	if d == nil || len(d.Files) != 1 || d.Files[0].Path != "new.txt" || d.Files[0].Added != 1 || !strings.Contains(d.Patch, "+new") {
		t.Errorf("diff: %+v", d)
	}
	log := gitReply(t, "log", e.json("POST", sb+"git/log", `{"dir":"app"}`)).Log
	if len(log) != 2 || log[0].Hash != rep.Hash || log[0].Author.Name != "Agent" || log[1].Subject != "first" {
		t.Errorf("log: %+v", log)
	}
	// A git command that ran and failed: data, with its kind.
	fail := gitReply(t, "nothing", e.json("POST", sb+"git/commit", `{"dir":"app","message":"again",`+identity+`}`)).Error
	if fail == nil || fail.Kind != "nothing_to_commit" || fail.Op != "commit" {
		t.Errorf("nothing to commit: %+v", fail)
	}
	fail = gitReply(t, "not a repo", e.json("POST", sb+"git/status", `{}`)).Error
	if fail == nil || fail.Kind != "not_repository" || fail.Code != api.CodeNotFound {
		t.Errorf("not a repository: %+v", fail)
	}
	// Worktrees.
	if rep := gitReply(t, "worktree add", e.json("POST", sb+"git/worktree_add", `{"dir":"app","path":"wt","branch":"feature"}`)); rep.Dir != "wt" {
		t.Errorf("worktree add: %+v", rep)
	}
	if wts := gitReply(t, "worktrees", e.json("POST", sb+"git/worktrees", `{"dir":"app"}`)).Worktrees; len(wts) != 2 || wts[1].Branch != "feature" {
		t.Errorf("worktrees: %+v", wts)
	}

	for _, c := range []struct {
		what, path, body string
		status           int
		code             api.Code
		fields           []string
	}{
		{"unknown field", "git/status", `{"dir":"app","bogus":1,"message":"x"}`, 400, api.CodeInvalidArgument, []string{"bogus", "message"}},
		{"unknown op", "git/rebase", `{}`, 501, api.CodeUnsupported, []string{"path"}},
		{"no message", "git/commit", `{"dir":"app"}`, 400, api.CodeInvalidArgument, []string{"author", "message"}},
		{"dir on clone", "git/clone", `{"dir":"x","url":"` + origin + `"}`, 400, api.CodeInvalidArgument, []string{"dir"}},
		{"outside", "git/status", `{"dir":"../x"}`, 403, api.CodePermissionDenied, []string{"dir"}},
		{"bad credentials", "git/push", `{"dir":"app","credentials":{"token":"x"}}`, 400, api.CodeInvalidArgument, []string{"credentials.url"}},
		{"negative timeout", "git/log", `{"dir":"app","timeout_ms":-5}`, 400, api.CodeInvalidArgument, []string{"timeout_ms"}},
	} {
		wantError(t, c.what, e.json("POST", sb+c.path, c.body), c.status, c.code, c.fields...)
	}
}

// TestGitPushTokenNotLeaked clones from and pushes to an HTTP remote
// that wants a token, through POST git/clone and git/push: the token
// works, and appears in no response, no log line of the server, and no
// file of the workspace.
func TestGitPushTokenNotLeaked(t *testing.T) {
	testutil.Require(t, gitDep, gitHTTPBackend)
	const token = "tok-8c1d5e0a-codegit-secret"
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
	root := t.TempDir()
	originRepo(t, root, "repo.git")
	backend, _ := gitHTTPBackendPath()
	cgiHandler := &cgi.Handler{Path: backend, Env: []string{
		"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
	}}
	var mu sync.Mutex
	authorized := 0
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Basic "+basic {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		authorized++
		mu.Unlock()
		cgiHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(remote.Close)

	var logs syncLog
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})},
		server.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
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
	creds := `"credentials":{"url":"` + remote.URL + `/","token":"` + token + `"}`

	var bodies [][]byte
	check := func(what string, r response) api.GitReply {
		t.Helper()
		bodies = append(bodies, r.body)
		return gitReply(t, what, r)
	}
	// Without the token: an authentication failure, as data.
	if f := check("clone without", e.json("POST", sb+"git/clone", `{"url":"`+remote.URL+`/repo.git","path":"no"}`)).Error; f == nil || f.Kind != "authentication" {
		t.Errorf("clone without a token: %+v", f)
	}
	if rep := check("clone", e.json("POST", sb+"git/clone", `{"url":"`+remote.URL+`/repo.git","path":"app",`+creds+`}`)); rep.Dir != "app" || rep.Error != nil {
		t.Fatalf("clone: %+v", rep)
	}
	if r := e.json("PUT", sb+"files?path=app/pushed.txt", "pushed\n", "Content-Type", api.ContentBytes); r.status >= 300 {
		t.Fatalf("write: %d %s", r.status, r.body)
	}
	hash := check("commit", e.json("POST", sb+"git/commit", `{"dir":"app","message":"push me","all":true,`+identity+`}`)).Hash
	if rep := check("push", e.json("POST", sb+"git/push", `{"dir":"app",`+creds+`}`)); rep.Error != nil {
		t.Fatalf("push: %+v", rep.Error)
	}
	cmd := exec.Command("git", "--git-dir="+filepath.Join(root, "repo.git"), "log", "-1", "--format=%H", "main")
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != hash {
		t.Errorf("remote main is %q (%v), want the pushed %s", out, err, hash)
	}
	// The remote moves on: the next push is rejected, git's message
	// comes back as data, redacted.
	other := t.TempDir()
	hostGit(t, other, "clone", "--quiet", filepath.Join(root, "repo.git"), ".")
	hostGit(t, other, "commit", "--quiet", "--allow-empty", "-m", "elsewhere")
	hostGit(t, other, "push", "--quiet", "origin", "main")
	check("commit 2", e.json("POST", sb+"git/commit", `{"dir":"app","message":"second","allow_empty":true,`+identity+`}`))
	if f := check("rejected", e.json("POST", sb+"git/push", `{"dir":"app",`+creds+`}`)).Error; f == nil || f.Kind != "rejected" {
		t.Errorf("push over a moved remote: %+v", f)
	}
	mu.Lock()
	n := authorized
	mu.Unlock()
	if n == 0 {
		t.Error("the remote saw no authorized request")
	}

	leaks := func(b []byte) bool { return bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(basic)) }
	for i, b := range bodies {
		if leaks(b) {
			t.Errorf("response %d holds the token: %s", i, b)
		}
	}
	if leaks([]byte(logs.String())) {
		t.Errorf("the server's log holds the token:\n%s", logs.String())
	}
	var info api.SandboxInfo
	json.Unmarshal(e.json("GET", strings.TrimSuffix(sb, "/"), "").body, &info)
	if info.Workspace == "" {
		t.Fatal("no workspace")
	}
	files := 0
	filepath.WalkDir(info.Workspace, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		files++
		if b, err := os.ReadFile(p); err == nil && leaks(b) {
			t.Errorf("%s holds the token", p)
		}
		return nil
	})
	if files < 10 {
		t.Errorf("only %d files in the workspace: not the clone?", files)
	}
}

// syncLog is a log buffer written by the server's goroutines.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestGitRemoteSameResult: git over the remote runtime (one POST
// git/{op} per operation, no exec) gives what git gives in process, the
// errors included.
func TestGitRemoteSameResult(t *testing.T) {
	testutil.Require(t, gitDep)
	origin := originRepo(t, t.TempDir(), "origin.git")
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{Token: "t", Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	paths := map[string]int{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if i := strings.Index(p, "/git/"); i >= 0 {
			p = p[i:]
		} else if i := strings.LastIndex(p, "/"); i >= 0 {
			p = p[i:]
		}
		mu.Lock()
		paths[p]++
		mu.Unlock()
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	rt, err := remote.New(remote.Options{URL: ts.URL, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	rsb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rsb.Close() })
	lsb, err := local.New(local.Options{}).Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lsb.Close() })

	type outcome struct {
		Status    git.Status
		Diff      git.Diff
		Subjects  []string
		Worktrees int
		Errs      []string
	}
	ctx := t.Context()
	run := func(sb execbox.Sandbox) outcome {
		t.Helper()
		var o outcome
		c := git.New(sb, git.Options{Identity: &git.Signature{Name: "A", Email: "a@example.com"}})
		repo, err := c.Clone(ctx, git.CloneOptions{URL: origin, Path: "app"})
		if err != nil {
			t.Fatalf("%T: clone: %v", sb, err)
		}
		if err := sb.Files().WriteFile(ctx, "app/README", []byte("changed\n"), execbox.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := sb.Files().WriteFile(ctx, "app/b.txt", []byte("b\n"), execbox.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if o.Status, err = repo.Status(ctx, git.StatusOptions{}); err != nil {
			t.Fatal(err)
		}
		if o.Diff, err = repo.Diff(ctx, git.DiffOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := repo.Add(ctx, git.AddOptions{Paths: []string{"b.txt"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := repo.Commit(ctx, git.CommitOptions{Message: "two\n\nbody", All: true}); err != nil {
			t.Fatal(err)
		}
		log, err := repo.Log(ctx, git.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range log {
			o.Subjects = append(o.Subjects, c.Subject+"|"+c.Message+"|"+c.Author.String())
		}
		if err := repo.Checkout(ctx, git.CheckoutOptions{Branch: "side", Create: true}); err != nil {
			t.Fatal(err)
		}
		wt, err := repo.AddWorktree(ctx, git.AddWorktreeOptions{Path: "wt", Branch: "w"})
		if err != nil || wt.Dir() != "wt" {
			t.Fatalf("worktree: %v", err)
		}
		wts, err := repo.Worktrees(ctx)
		if err != nil {
			t.Fatal(err)
		}
		o.Worktrees = len(wts)
		// Errors: a git failure, a missing repository, invalid options.
		_, err = repo.Commit(ctx, git.CommitOptions{Message: "nothing"})
		var ge *git.Error
		if !errors.Is(err, git.ErrNothingToCommit) || !errors.As(err, &ge) || ge.Op != "commit" {
			t.Errorf("%T: nothing to commit: %v", sb, err)
		}
		o.Errs = append(o.Errs, err.Error())
		other, _ := c.Repo("nope")
		_, err = other.Status(ctx, git.StatusOptions{})
		if !errors.Is(err, git.ErrNotRepository) || !errors.Is(err, execbox.ErrNotFound) {
			t.Errorf("%T: not a repository: %v", sb, err)
		}
		o.Errs = append(o.Errs, err.Error())
		err = repo.Checkout(ctx, git.CheckoutOptions{Branch: "x", Create: true, Detach: true, StartPoint: "bad..ref"})
		if !errors.Is(err, execbox.ErrInvalidArgument) {
			t.Errorf("%T: invalid checkout: %v", sb, err)
		}
		o.Errs = append(o.Errs, err.Error())
		return o
	}
	want, got := run(lsb), run(rsb)
	if !reflect.DeepEqual(want, got) {
		t.Errorf("in process:\n%+v\nremote:\n%+v", want, got)
	}
	mu.Lock()
	defer mu.Unlock()
	if paths["/exec"] != 0 || paths["/git/status"] != 2 || paths["/git/commit"] != 2 || paths["/git/clone"] != 1 {
		t.Errorf("requests: %v, want git operations only", paths)
	}
}
