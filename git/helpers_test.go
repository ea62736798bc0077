package git_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/git"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

var (
	alice = &git.Signature{Name: "Alice", Email: "alice@example.com"}
	bob   = &git.Signature{Name: "Bob", Email: "bob@example.com"}
)

// env is a sandbox of the local runtime for one test, with a git client.
type env struct {
	t   *testing.T
	sb  execbox.Sandbox
	c   *git.Client
	ws  string        // the workspace on the host
	log *bytes.Buffer // everything logged by the runtime and the client
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

// newEnv creates a local sandbox with a temporary workspace and a client
// with opts (Identity defaults to alice, Logger to a buffer and the
// test's output). The sandbox is closed, and checked to have left no
// process, when the test ends.
func newEnv(t *testing.T, opts git.Options) *env {
	t.Helper()
	testutil.Require(t, testutil.Command("git"))
	logs := &syncBuffer{}
	w := io.MultiWriter(logs, t.Output())
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt := local.New(local.Options{Logger: logger})
	sb, err := rt.Create(t.Context(), execbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	ws := sb.Workspace()
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("close sandbox: %v", err)
		}
		if pids := procsUnder(ws); len(pids) > 0 {
			t.Errorf("processes left running in the workspace: %v", pids)
		}
	})
	if opts.Identity == nil {
		opts.Identity = alice
	}
	if opts.Logger == nil {
		opts.Logger = logger
	}
	c, err := git.NewClient(sb, opts)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, sb: sb, c: c, ws: ws}
	e.log = &logs.Buffer
	return e
}

// write writes a file in the workspace.
func (e *env) write(p, content string) {
	e.t.Helper()
	if err := e.sb.Files().WriteFile(e.t.Context(), p, []byte(content), execbox.WriteOptions{Parents: true}); err != nil {
		e.t.Fatal(err)
	}
}

// read reads a file of the workspace.
func (e *env) read(p string) string {
	e.t.Helper()
	b, err := e.sb.Files().ReadFile(e.t.Context(), p, execbox.ReadOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// exists reports whether p exists in the workspace.
func (e *env) exists(p string) bool {
	_, err := os.Lstat(filepath.Join(e.ws, p))
	return err == nil
}

// git runs a git command in a repository through Repo.Exec and fails the
// test unless it exits 0; it returns stdout.
func (e *env) git(r *git.Repo, args ...string) string {
	e.t.Helper()
	res, err := r.Exec(e.t.Context(), git.ExecOptions{Args: args})
	if err != nil {
		e.t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	if !res.Success() {
		e.t.Fatalf("git %s: %s: %s", strings.Join(args, " "), res.String(), res.Stderr.Text())
	}
	return res.Stdout.Text()
}

// remote makes a bare repository "remote.git" holding one commit on
// main (README), and returns its file:// URL.
func (e *env) remote() string {
	e.t.Helper()
	ctx := e.t.Context()
	if _, err := e.c.Init(ctx, git.InitOptions{Path: "remote.git", Bare: true}); err != nil {
		e.t.Fatal(err)
	}
	seed, err := e.c.Init(ctx, git.InitOptions{Path: "seed"})
	if err != nil {
		e.t.Fatal(err)
	}
	e.write("seed/README", "hello\n")
	if _, err := seed.Commit(ctx, git.CommitOptions{Message: "initial", All: true}); err != nil {
		e.t.Fatal(err)
	}
	url := "file://" + filepath.Join(e.ws, "remote.git")
	e.git(seed, "remote", "add", "origin", url)
	if err := seed.Push(ctx, git.PushOptions{SetUpstream: true}); err != nil {
		e.t.Fatal(err)
	}
	return url
}

// clone clones url into p.
func (e *env) clone(url, p string) *git.Repo {
	e.t.Helper()
	r, err := e.c.Clone(e.t.Context(), git.CloneOptions{URL: url, Path: p})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// commit writes files and commits them all in r.
func (e *env) commit(r *git.Repo, msg string, files ...string) string {
	e.t.Helper()
	for i := 0; i+1 < len(files); i += 2 {
		e.write(filepath.Join(r.Dir(), files[i]), files[i+1])
	}
	h, err := r.Commit(e.t.Context(), git.CommitOptions{Message: msg, All: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// procsUnder lists the processes whose working directory or command line
// lies under dir.
func procsUnder(dir string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	self := os.Getpid()
	for _, ent := range ents {
		pid := ent.Name()
		if pid == "" || pid[0] < '0' || pid[0] > '9' || pid == strconv.Itoa(self) {
			continue
		}
		cwd, _ := os.Readlink("/proc/" + pid + "/cwd")
		cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		if strings.HasPrefix(cwd, dir) || bytes.Contains(cmd, []byte(dir)) {
			out = append(out, pid+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// ctx returns the test's context bounded to a minute.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}
