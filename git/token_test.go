package git_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/git"
	"github.com/execbox/execbox/internal/testutil"
)

// gitServer serves the bare repositories under a directory over smart
// HTTP on loopback (git http-backend through net/http/cgi), pushing
// allowed, behind a check of the Authorization header.
type gitServer struct {
	*httptest.Server
	root   string
	secret string // the token it accepts; "" accepts anything

	mu       sync.Mutex
	headers  []string // every Authorization header received
	ok       int      // requests that passed the check
	cmdLeaks []string // command lines holding the secret, seen during requests
}

// gitHTTPBackend is git's CGI server, which the token tests push to.
var gitHTTPBackend = testutil.NewDep("git-http-backend", func() error {
	_, err := gitHTTPBackendPath()
	return err
})

func gitHTTPBackendPath() (string, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("git --exec-path: %w", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		return "", err
	}
	return backend, nil
}

func newGitServer(t *testing.T, secret string) *gitServer {
	t.Helper()
	testutil.Require(t, testutil.Command("git"), gitHTTPBackend)
	backend, _ := gitHTTPBackendPath()
	s := &gitServer{root: t.TempDir(), secret: secret}
	cgiHandler := &cgi.Handler{
		Path: backend,
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
		},
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+secret))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		// The git client is waiting for this answer: its command line is
		// in the process table now.
		leaks := cmdlinesContaining(secret, strings.TrimPrefix(want, "Basic "))
		s.mu.Lock()
		s.headers = append(s.headers, got)
		s.cmdLeaks = append(s.cmdLeaks, leaks...)
		pass := secret == "" || got == want
		if pass {
			s.ok++
		}
		s.mu.Unlock()
		if !pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		cgiHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// bare creates an empty bare repository name on the server.
func (s *gitServer) bare(t *testing.T, name string) string {
	t.Helper()
	cmd := exec.Command("git", "init", "--quiet", "--bare", "--initial-branch=main", filepath.Join(s.root, name))
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	return filepath.Join(s.root, name)
}

func (s *gitServer) stats() (headers []string, ok int, leaks []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.headers...), s.ok, append([]string(nil), s.cmdLeaks...)
}

// cmdlinesContaining lists the command lines of running processes that
// contain the token or its HTTP Basic form.
func cmdlinesContaining(token, basic string) []string {
	if token == "" {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && (bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(basic))) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// TestTokenDoesNotLeak runs clone, fetch, pull and push against a real
// HTTP server that demands the token, and then looks for the token
// everywhere it must not be: argv of running processes, every file of
// the workspace (.git/config included), errors, results and logs. Plain
// http:// on loopback is enough: http.<url>.extraHeader is sent on http
// and https alike, so the same code path runs as for an https remote.
func TestTokenDoesNotLeak(t *testing.T) {
	const token = "ghp_S3cretT0ken4Test_9f8e7d6c5b4a"
	srv := newGitServer(t, token)
	bareDir := srv.bare(t, "repo.git")
	evil := newGitServer(t, "") // records any header it gets
	evilDir := evil.bare(t, "repo.git")

	creds := &git.Credentials{URL: srv.URL + "/", Token: token}
	e := newEnv(t, git.Options{Credentials: creds})
	ctx := ctx(t)
	var errs []error
	var results []execbox.Result
	keep := func(err error) error {
		if err != nil {
			errs = append(errs, err)
			var ge *git.Error
			if errors.As(err, &ge) {
				results = append(results, ge.Result)
			}
		}
		return err
	}

	// Seed the server's repository over file:// (no token involved).
	seed, err := e.c.Init(ctx, git.InitOptions{Path: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	e.commit(seed, "initial", "README", "hi\n")
	e.git(seed, "push", "-q", "file://"+bareDir, "main")
	e.git(seed, "push", "-q", "file://"+evilDir, "main")

	url := srv.URL + "/repo.git"
	a, err := e.c.Clone(ctx, git.CloneOptions{URL: url, Path: "a"})
	if keep(err) != nil {
		t.Fatalf("clone with the token: %v", err)
	}
	b, err := e.c.Clone(ctx, git.CloneOptions{URL: url, Path: "b", Depth: 1})
	if keep(err) != nil {
		t.Fatalf("shallow clone with the token: %v", err)
	}
	e.commit(a, "from a", "a.txt", "a\n")
	if keep(a.Push(ctx, git.PushOptions{})) != nil {
		t.Fatalf("push with the token: %v", errs[len(errs)-1])
	}
	if keep(b.Fetch(ctx, git.FetchOptions{Prune: true})) != nil {
		t.Fatalf("fetch with the token: %v", errs[len(errs)-1])
	}
	if keep(b.Pull(ctx, git.PullOptions{})) != nil {
		t.Fatalf("pull with the token: %v", errs[len(errs)-1])
	}
	if got := e.read("b/a.txt"); got != "a\n" {
		t.Errorf("b/a.txt = %q after pull", got)
	}
	// A conflict through an authenticated pull.
	e.commit(a, "a again", "README", "a\n")
	keep(a.Push(ctx, git.PushOptions{}))
	e.commit(b, "b", "README", "b\n")
	if err := keep(b.Push(ctx, git.PushOptions{})); !errors.Is(err, git.ErrRejected) {
		t.Errorf("push behind: %v, want ErrRejected", err)
	}
	if err := keep(b.Pull(ctx, git.PullOptions{})); !errors.Is(err, git.ErrConflict) {
		t.Errorf("pull with a conflict: %v, want ErrConflict", err)
	}
	keep(b.AbortMerge(ctx))

	headers, ok, _ := srv.stats()
	if ok == 0 {
		t.Fatal("the server never saw the token: the credential path was not exercised")
	}
	t.Logf("server: %d requests, %d authenticated", len(headers), ok)

	// Wrong token, no token: authentication errors, which do not show
	// the wrong token either.
	const wrongToken = "wrong-T0ken-zzzz"
	wrong := git.New(e.sb, git.Options{Credentials: &git.Credentials{URL: srv.URL, Token: wrongToken}})
	_, err = wrong.Clone(ctx, git.CloneOptions{URL: url, Path: "w"})
	if !errors.Is(keep(err), git.ErrAuthentication) || !errors.Is(err, execbox.ErrPermission) {
		t.Errorf("clone with a wrong token: %v, want ErrAuthentication", err)
	}
	if err != nil && strings.Contains(err.Error(), wrongToken) {
		t.Errorf("error shows the wrong token: %v", err)
	}
	anon := git.New(e.sb, git.Options{})
	_, err = anon.Clone(ctx, git.CloneOptions{URL: url, Path: "n"})
	if !errors.Is(keep(err), git.ErrAuthentication) {
		t.Errorf("clone without a token: %v, want ErrAuthentication", err)
	}

	// The token goes only where Credentials.URL says, whatever the
	// repository's config says: another server (another port), by remote
	// name, by URL, through insteadOf, as origin's new URL.
	evilURL := evil.URL + "/repo.git"
	e.git(a, "remote", "add", "evil", evilURL)
	keep(a.Fetch(ctx, git.FetchOptions{Remote: "evil"}))
	keep(a.Fetch(ctx, git.FetchOptions{Remote: evilURL}))
	e.git(a, "config", "url."+evil.URL+"/.insteadOf", srv.URL+"/")
	keep(a.Fetch(ctx, git.FetchOptions{}))
	e.git(a, "config", "--unset", "url."+evil.URL+"/.insteadOf")
	e.git(a, "remote", "set-url", "origin", evilURL)
	keep(a.Push(ctx, git.PushOptions{Refspecs: []string{"main:refs/heads/stolen"}}))
	e.git(a, "remote", "set-url", "origin", url)
	evilHeaders, _, _ := evil.stats()
	if len(evilHeaders) == 0 {
		t.Error("the other server got no request")
	}
	for _, h := range evilHeaders {
		if h != "" {
			t.Errorf("the other server got an Authorization header %q", h)
		}
	}

	// A pre-push hook (written by code in the sandbox) does not run with
	// the token around.
	e.write("a/.git/hooks/pre-push", "#!/bin/sh\nenv > hook-env.txt\n")
	if err := os.Chmod(filepath.Join(e.ws, "a/.git/hooks/pre-push"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.commit(a, "after hook", "c.txt", "c\n")
	if keep(a.Push(ctx, git.PushOptions{})) != nil {
		t.Fatalf("push: %v", errs[len(errs)-1])
	}
	if e.exists("a/hook-env.txt") {
		t.Error("a hook ran during an authenticated push")
	}

	// Output that does show the token comes back redacted.
	res, err := a.Exec(ctx, git.ExecOptions{Args: []string{"-c", "leak.value=" + token, "config", "leak.value"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Stdout.Text(); got != "[REDACTED]\n" {
		t.Errorf("git config printing the token returned %q", got)
	}
	results = append(results, res)

	// Now look for it.
	_, _, leaks := srv.stats()
	for _, l := range leaks {
		t.Errorf("token in a process's command line: %s", l)
	}
	for _, err := range errs {
		if strings.Contains(err.Error(), token) {
			t.Errorf("token in an error: %v", err)
		}
	}
	for _, r := range results {
		if bytes.Contains(r.Stdout.Data, []byte(token)) || bytes.Contains(r.Stderr.Data, []byte(token)) {
			t.Errorf("token in a result: %q %q", r.Stdout.Data, r.Stderr.Data)
		}
	}
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
	for _, secret := range []string{token, basic} {
		if bytes.Contains(e.log.Bytes(), []byte(secret)) {
			t.Errorf("token in the logs")
		}
		filepath.WalkDir(e.ws, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(secret)) {
				t.Errorf("token stored in %s", p)
			}
			return nil
		})
	}
	for _, cfg := range []string{"a/.git/config", "b/.git/config"} {
		if c := e.read(cfg); !strings.Contains(c, url) || strings.Contains(c, "@") {
			t.Errorf("%s does not hold the plain URL:\n%s", cfg, c)
		}
	}
}

func TestCredentialsInvalid(t *testing.T) {
	e := newEnv(t, git.Options{})
	for _, tc := range []struct {
		name  string
		creds git.Credentials
		field string
	}{
		{"no url", git.Credentials{Token: "s3cr3t-tok"}, "credentials.url"},
		{"ssh url", git.Credentials{URL: "ssh://host/", Token: "s3cr3t-tok"}, "credentials.url"},
		{"user in url", git.Credentials{URL: "https://u:p@host/", Token: "s3cr3t-tok"}, "credentials.url"},
		{"no token", git.Credentials{URL: "https://host/"}, "credentials.token"},
		{"header injection", git.Credentials{URL: "https://host/", Token: "s3cr3t-tok\r\nX-Evil: 1"}, "credentials.token"},
		{"colon in user", git.Credentials{URL: "https://host/", Token: "s3cr3t-tok", Username: "a:b"}, "credentials.username"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := git.NewClient(e.sb, git.Options{Credentials: &tc.creds})
			var fe *execbox.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, execbox.ErrInvalidArgument) {
				t.Fatalf("err = %v, want a field error on %s", err, tc.field)
			}
			if tc.creds.Token != "" && strings.Contains(err.Error(), tc.creds.Token) {
				t.Errorf("error shows the token: %v", err)
			}
		})
	}
}
