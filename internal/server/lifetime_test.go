package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
	"github.com/execbox/execbox/runtimes/remote"
)

// lifeEnv is a server whose reaper looks often, with a client, noting
// the sandboxes the observer hears ended.
type lifeEnv struct {
	*env
	c *client.Client

	mu     sync.Mutex
	closed []server.ClosedStats
}

func newLifeEnv(t *testing.T, l server.Lifetimes) *lifeEnv {
	t.Helper()
	if l.ReapInterval == 0 {
		l.ReapInterval = 20 * time.Millisecond
	}
	le := &lifeEnv{}
	le.env = newEnv(t, server.Options{Lifetimes: l, Observer: &server.Observer{Closed: func(s server.ClosedStats) {
		le.mu.Lock()
		le.closed = append(le.closed, s)
		le.mu.Unlock()
	}}})
	le.c, _ = client.New(le.ts.URL)
	return le
}

func (le *lifeEnv) create(spec execbox.Spec) *client.Sandbox {
	le.t.Helper()
	sb, err := le.c.Create(le.t.Context(), spec, client.CreateOptions{})
	if err != nil {
		le.t.Fatalf("Create: %v", err)
	}
	return sb
}

func (le *lifeEnv) info(id string) api.SandboxInfo {
	le.t.Helper()
	info, err := le.c.SandboxInfo(le.t.Context(), id)
	if err != nil {
		le.t.Fatalf("SandboxInfo(%s): %v", id, err)
	}
	return info
}

// waitEnded waits for sandbox id to end and returns its last state.
func (le *lifeEnv) waitEnded(id string, within time.Duration) api.SandboxInfo {
	le.t.Helper()
	var info api.SandboxInfo
	testutil.Eventually(le.t, within, func() bool {
		info = le.info(id)
		return info.State != api.StateRunning
	}, "sandbox %s to end", id)
	return info
}

// waitObserved waits for the observer to hear of an end for reason.
func (le *lifeEnv) waitObserved(reason string) {
	le.t.Helper()
	testutil.Eventually(le.t, 10*time.Second, func() bool {
		le.mu.Lock()
		defer le.mu.Unlock()
		return slices.ContainsFunc(le.closed, func(s server.ClosedStats) bool {
			return s.Reason == reason && s.Runtime == "local"
		})
	}, "Observer.Closed with reason %s", reason)
}

// TestLifetimeTimeout: a sandbox whose lifetime runs out is closed with
// what runs in it, and its ID answers its last state and, for calls,
// closed saying why.
func TestLifetimeTimeout(t *testing.T) {
	le := newLifeEnv(t, server.Lifetimes{})
	sb := le.create(execbox.Spec{Timeout: time.Second})
	info := sb.Info()
	if info.State != api.StateRunning || !info.ExpiresAt.Equal(info.CreatedAt.Add(time.Second)) || info.IdleTimeoutMS != 0 {
		t.Errorf("created: state %q, expires %v (created %v), idle %v", info.State, info.ExpiresAt, info.CreatedAt, info.IdleTimeoutMS)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	if _, err := sb.Start(t.Context(), execbox.ExecRequest{Shell: "echo $$ > " + pidFile + "; exec sleep 300"}); err != nil {
		t.Fatal(err)
	}
	pid := testutil.WaitPIDFile(t, pidFile)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	end := le.waitEnded(sb.ID(), 20*time.Second)
	if end.State != api.StateClosed || end.EndReason != api.EndTimeout || end.EndedAt.Before(end.ExpiresAt) ||
		!strings.Contains(end.EndDetail, "lifetime of 1s") {
		t.Errorf("ended: %+v", end)
	}
	testutil.Eventually(t, 20*time.Second, func() bool { return !testutil.Alive(pid) }, "the sleep %d to be killed", pid)
	testutil.Eventually(t, 20*time.Second, func() bool {
		_, err := os.Stat(sb.Workspace())
		return errors.Is(err, os.ErrNotExist)
	}, "the workspace to be removed")
	le.waitObserved("timeout")

	_, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}})
	if !errors.Is(err, execbox.ErrClosed) || !strings.Contains(err.Error(), "lifetime of 1s ran out") {
		t.Errorf("exec after the lifetime: %v, want ErrClosed saying the lifetime ran out", err)
	}
	if _, err := le.c.Sandbox(t.Context(), sb.ID()); !errors.Is(err, execbox.ErrClosed) {
		t.Errorf("attach after the lifetime: %v, want ErrClosed", err)
	}
	if l, _ := le.c.Sandboxes(t.Context()); len(l) != 0 {
		t.Errorf("listed after the end: %+v", l)
	}
}

// TestLifetimeIdle: the idle timeout ends a sandbox nobody uses, not one
// with a process running, a session open or calls coming.
func TestLifetimeIdle(t *testing.T) {
	le := newLifeEnv(t, server.Lifetimes{})
	ctx := t.Context()
	const idle = time.Second
	spec := execbox.Spec{IdleTimeout: idle}
	quiet, busy, sessioned := le.create(spec), le.create(spec), le.create(spec)
	// "called" checks that calls are activity, by the time they leave;
	// quiet, that the reaper ends a sandbox idle for its timeout. An
	// hour's timeout keeps a stalled call (a loaded machine) from ending
	// it in between.
	called := le.create(execbox.Spec{IdleTimeout: time.Hour})
	if got := quiet.Info().IdleTimeoutMS; got != 1000 {
		t.Errorf("idle_timeout_ms = %v, want 1000", got)
	}
	started := time.Now()
	p, err := busy.Start(ctx, execbox.ExecRequest{Command: []string{"sleep", "3"}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := sessioned.OpenSession(ctx, execbox.SessionOptions{Kind: execbox.SessionBash})
	if err != nil {
		t.Fatal(err)
	}

	// Each call is activity: the sandbox's last activity is no earlier
	// than the call (reading its description is none).
	for range 3 {
		before := time.Now()
		if _, err := called.Files().Stat(ctx, "."); err != nil {
			t.Fatalf("a sandbox receiving calls ended: %v", err)
		}
		if info := le.info(called.ID()); info.LastActiveAt.Before(before) {
			t.Errorf("last activity %v after a call made at %v", info.LastActiveAt, before)
		}
	}
	end := le.waitEnded(quiet.ID(), 20*time.Second)
	if end.EndReason != api.EndIdle || end.EndedAt.Sub(end.LastActiveAt) < idle || !strings.Contains(end.EndDetail, "idle timeout of 1s") {
		t.Errorf("quiet ended: %+v", end)
	}
	le.waitObserved("idle")
	if info := le.info(sessioned.ID()); info.State != api.StateRunning {
		t.Errorf("a sandbox with an open session ended: %+v", info)
	}
	// The process outlives the idle timeout: its sandbox is kept until
	// it ends (Wait would fail otherwise), then ends idle.
	if res, err := p.Wait(ctx); err != nil || !res.Success() {
		t.Fatalf("Wait of the process of an idle-timed sandbox = %s, %v", res.String(), err)
	}
	// Active while its process ran (past the idle timeout after its
	// start), then idle for the timeout.
	end = le.waitEnded(busy.ID(), 20*time.Second)
	if end.EndReason != api.EndIdle || end.LastActiveAt.Before(started.Add(idle)) || end.EndedAt.Sub(end.LastActiveAt) < idle {
		t.Errorf("busy, its process started at %v: %+v", started, end)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	if end := le.waitEnded(sessioned.ID(), 20*time.Second); end.EndReason != api.EndIdle {
		t.Errorf("sessioned ended: %+v", end)
	}
}

// TestLifetimeBounds: a spec asking none gets the server's default (or
// its maximum), one asking more than the maximum is refused naming the
// field.
func TestLifetimeBounds(t *testing.T) {
	le := newLifeEnv(t, server.Lifetimes{Timeout: time.Hour, MaxTimeout: 2 * time.Hour, IdleTimeout: 10 * time.Minute, MaxIdleTimeout: 20 * time.Minute})
	info := le.create(execbox.Spec{}).Info()
	if !info.ExpiresAt.Equal(info.CreatedAt.Add(time.Hour)) || info.IdleTimeoutMS != 600000 || info.LastActiveAt.IsZero() {
		t.Errorf("defaults: %+v", info)
	}
	info = le.create(execbox.Spec{Timeout: 90 * time.Minute, IdleTimeout: 15 * time.Minute}).Info()
	if !info.ExpiresAt.Equal(info.CreatedAt.Add(90*time.Minute)) || info.IdleTimeoutMS != 900000 {
		t.Errorf("asked: %+v", info)
	}
	_, err := le.c.Create(t.Context(), execbox.Spec{Timeout: 3 * time.Hour}, client.CreateOptions{})
	var fe *execbox.FieldError
	if !errors.Is(err, execbox.ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != "timeout" {
		t.Errorf("a timeout over the maximum: %v, want ErrInvalidArgument naming timeout", err)
	}
	wantError(t, "both over", le.json("POST", "/v1/sandboxes", `{"timeout_ms": 1e10, "idle_timeout_ms": 1e10}`),
		400, api.CodeInvalidArgument, "timeout_ms", "idle_timeout_ms")
	wantError(t, "negative", le.json("POST", "/v1/sandboxes", `{"timeout_ms": -5, "idle_timeout_ms": -1}`),
		400, api.CodeInvalidArgument, "timeout_ms", "idle_timeout_ms")
	wantError(t, "not a number", le.json("POST", "/v1/sandboxes", `{"timeout_ms": "1h"}`), 400, api.CodeInvalidArgument, "timeout_ms")
	if l, _ := le.c.Sandboxes(t.Context()); len(l) != 2 {
		t.Errorf("%d sandboxes after refused creates, want 2", len(l))
	}

	// A maximum without a default is the default.
	info = newLifeEnv(t, server.Lifetimes{MaxTimeout: time.Hour}).create(execbox.Spec{}).Info()
	if !info.ExpiresAt.Equal(info.CreatedAt.Add(time.Hour)) || info.IdleTimeoutMS != 0 {
		t.Errorf("maximum only: %+v", info)
	}
	// A server without lifetimes sets none.
	info = newLifeEnv(t, server.Lifetimes{}).create(execbox.Spec{}).Info()
	if !info.ExpiresAt.IsZero() || info.IdleTimeoutMS != 0 || info.State != api.StateRunning {
		t.Errorf("no lifetimes: %+v", info)
	}
}

// TestLifetimeExtend: POST timeout sets the end from now, sooner or
// later, within the maximum from creation.
func TestLifetimeExtend(t *testing.T) {
	le := newLifeEnv(t, server.Lifetimes{MaxTimeout: time.Hour})
	ctx := t.Context()
	sb := le.create(execbox.Spec{Timeout: time.Minute})
	before := time.Now()
	info, err := sb.SetTimeout(ctx, 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if e := info.ExpiresAt; e.Before(before.Add(30*time.Minute)) || e.After(time.Now().Add(30*time.Minute)) {
		t.Errorf("expires at %v after extending by 30m at %v", e, before)
	}
	if got := le.info(sb.ID()).ExpiresAt; !got.Equal(info.ExpiresAt) {
		t.Errorf("GET says expires at %v, the extension %v", got, info.ExpiresAt)
	}
	_, err = sb.SetTimeout(ctx, 2*time.Hour)
	var fe *execbox.FieldError
	if !errors.Is(err, execbox.ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != "timeout" || !strings.Contains(err.Error(), "maximum lifetime of 1h0m0s") {
		t.Errorf("extending past the maximum: %v, want ErrInvalidArgument naming timeout", err)
	}
	if _, err := sb.SetTimeout(ctx, 0); !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("SetTimeout(0): %v, want ErrInvalidArgument", err)
	}
	path := "/v1/sandboxes/" + sb.ID() + "/timeout"
	for _, body := range []string{`{"timeout_ms": 0}`, `{"timeout_ms": -1}`, `{}`, `{"timeout_ms": 1e300}`} {
		wantError(t, body, le.json("POST", path, body), 400, api.CodeInvalidArgument, "timeout_ms")
	}
	wantError(t, "no body", le.json("POST", path, ""), 400, api.CodeInvalidArgument)
	wantError(t, "unknown field", le.json("POST", path, `{"timeout": 5}`), 400, api.CodeInvalidArgument, "timeout")
	wantError(t, "unknown sandbox", le.json("POST", "/v1/sandboxes/sb-nope/timeout", `{"timeout_ms": 5}`), 404, api.CodeNotFound, "sandbox")

	// Sooner: it ends then.
	if _, err := sb.SetTimeout(ctx, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if end := le.waitEnded(sb.ID(), 20*time.Second); end.EndReason != api.EndTimeout {
		t.Errorf("ended: %+v", end)
	}
	if _, err := sb.SetTimeout(ctx, time.Minute); !errors.Is(err, execbox.ErrClosed) {
		t.Errorf("extending an ended sandbox: %v, want ErrClosed", err)
	}
}

// TestListLabelFilter: ?label=K=V keeps the sandboxes with every label
// asked.
func TestListLabelFilter(t *testing.T) {
	le := newLifeEnv(t, server.Lifetimes{})
	a := le.create(execbox.Spec{Labels: map[string]string{"team": "a", "env": "dev"}})
	b := le.create(execbox.Spec{Labels: map[string]string{"team": "b", "env": "dev", "q": "x=y"}})
	c := le.create(execbox.Spec{})
	for _, tt := range []struct {
		labels map[string]string
		want   []string
	}{
		{nil, []string{a.ID(), b.ID(), c.ID()}},
		{map[string]string{"env": "dev"}, []string{a.ID(), b.ID()}},
		{map[string]string{"env": "dev", "team": "a"}, []string{a.ID()}},
		{map[string]string{"q": "x=y"}, []string{b.ID()}},
		{map[string]string{"team": "c"}, nil},
		{map[string]string{"env": ""}, nil},
	} {
		l, err := le.c.ListSandboxes(t.Context(), client.ListOptions{Labels: tt.labels})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, info := range l {
			got = append(got, info.ID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("labels %v: %v, want %v", tt.labels, got, tt.want)
		}
	}
	for _, q := range []string{"label=team", "label==a", "label=env=dev&label=x"} {
		wantError(t, q, le.json("GET", "/v1/sandboxes?"+q, ""), 400, api.CodeInvalidArgument, "label")
	}
}

// TestEndedSandboxState: a deleted sandbox's ID answers its last state,
// and calls on it closed, saying so; shutdown is observed.
func TestEndedSandboxState(t *testing.T) {
	le := newLifeEnv(t, server.Lifetimes{})
	sb := le.create(execbox.Spec{Labels: map[string]string{"k": "v"}})
	kept := le.create(execbox.Spec{})
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	end := le.info(sb.ID())
	if end.State != api.StateClosed || end.EndReason != api.EndDeleted || end.EndedAt.IsZero() || end.Labels["k"] != "v" || end.EndDetail != "it was deleted" {
		t.Errorf("deleted: %+v", end)
	}
	e := wantError(t, "exec in a deleted sandbox", le.json("POST", "/v1/sandboxes/"+sb.ID()+"/exec", `{"command":["true"]}`), http.StatusGone, api.CodeClosed)
	if e != nil && !strings.Contains(e.Message, "it was deleted") {
		t.Errorf("message %q does not say the sandbox was deleted", e.Message)
	}
	le.waitObserved("deleted")
	if err := le.srv.Close(); err != nil {
		t.Fatal(err)
	}
	le.waitObserved("shutdown")
	var info api.SandboxInfo
	if r := le.json("GET", "/v1/sandboxes/"+kept.ID(), ""); json.Unmarshal(r.body, &info) != nil || info.EndReason != api.EndShutdown {
		t.Errorf("after shutdown: %d %s", r.status, r.body)
	}
}

// TestInProcessRuntimesRefuseLifetimes: a runtime that cannot end its
// sandboxes refuses lifetimes rather than ignore them.
func TestInProcessRuntimesRefuseLifetimes(t *testing.T) {
	_, err := local.New(local.Options{}).Create(t.Context(), execbox.Spec{Timeout: time.Minute, IdleTimeout: time.Minute})
	if !errors.Is(err, execbox.ErrUnsupported) {
		t.Fatalf("local Create with lifetimes: %v, want ErrUnsupported", err)
	}
	var fields []string
	for _, e := range flattenErr(err) {
		var fe *execbox.FieldError
		if errors.As(e, &fe) {
			fields = append(fields, fe.Field)
		}
	}
	if !slices.Equal(fields, []string{"timeout", "idle_timeout"}) {
		t.Errorf("fields %v, want timeout idle_timeout", fields)
	}
}

func flattenErr(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flattenErr(e)...)
		}
		return out
	}
	return []error{err}
}

// TestReaperStopsAtClose: the reaper's goroutine ends with Close.
func TestReaperStopsAtClose(t *testing.T) {
	srv, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A goroutine not yet scheduled shows only its go statement's
	// wrapper: wait for it to run.
	for deadline := time.Now().Add(10 * time.Second); !reaperRuns(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			srv.Close()
			t.Fatal("no reaper goroutine after New")
		}
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if reaperRuns() {
		t.Error("the reaper goroutine outlived Close")
	}
}

// reaperRuns reports whether a Server's reaper goroutine runs.
func reaperRuns() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "server.(*Server).reap(")
}

// TestRemoteRuntimeLifetimes: the remote runtime carries a spec's
// lifetimes to its server, which enforces them, and its sandboxes can
// be extended.
func TestRemoteRuntimeLifetimes(t *testing.T) {
	le := newLifeEnv(t, server.Lifetimes{MaxTimeout: time.Hour})
	rt, err := remote.New(remote.Options{URL: le.ts.URL, Token: "unused"})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := rt.Create(t.Context(), execbox.Spec{Timeout: time.Minute, IdleTimeout: 500 * time.Millisecond,
		Assets: []execbox.Asset{{Path: "a", Content: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	info := le.info(sb.ID())
	if !info.ExpiresAt.Equal(info.CreatedAt.Add(time.Minute)) || info.IdleTimeoutMS != 500 {
		t.Errorf("through the remote runtime: %+v", info)
	}
	setter, ok := sb.(interface {
		SetTimeout(context.Context, time.Duration) (api.SandboxInfo, error)
	})
	if !ok {
		t.Fatalf("the remote runtime's sandbox %T has no SetTimeout", sb)
	}
	if _, err := setter.SetTimeout(t.Context(), 2*time.Hour); !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Errorf("extending past the maximum through the remote runtime: %v", err)
	}
	if end := le.waitEnded(sb.ID(), 20*time.Second); end.EndReason != api.EndIdle {
		t.Errorf("ended: %+v", end)
	}
	_, err = rt.Create(t.Context(), execbox.Spec{Timeout: -time.Second})
	var fe *execbox.FieldError
	if !errors.Is(err, execbox.ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != "timeout" {
		t.Errorf("a negative timeout through the remote runtime: %v, want ErrInvalidArgument naming timeout", err)
	}
}
