package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
	"github.com/execbox/execbox/runtimes/remote"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// newPoolEnv is a server on loopback over rts (the local runtime if
// none), closed at the end of the test.
func newPoolEnv(t *testing.T, opts server.Options, rts ...execbox.Runtime) *env {
	t.Helper()
	if len(rts) == 0 {
		rts = []execbox.Runtime{local.New(local.Options{})}
	}
	opts.Logger = testutil.Logger(t)
	srv, err := server.New(rts, opts)
	if err != nil {
		t.Fatal(err)
	}
	check := newAPICheck(t, false) // every exchange checked against api/openapi.yaml
	ts := httptest.NewServer(check.wrap(srv))
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	return &env{t: t, srv: srv, ts: ts, api: check}
}

// definePool posts a pool and fails the test unless it is created.
func (e *env) definePool(body string) {
	e.t.Helper()
	if r := e.json("POST", "/v1/pools", body); r.status != http.StatusCreated {
		e.t.Fatalf("POST /v1/pools %s: %d %s", body, r.status, r.body)
	}
}

func (e *env) poolStatus(name string) api.PoolStatus {
	e.t.Helper()
	r := e.json("GET", "/v1/pools/"+name, "")
	var st api.PoolStatus
	if err := json.Unmarshal(r.body, &st); r.status != http.StatusOK || err != nil {
		e.t.Fatalf("GET /v1/pools/%s: %d %s", name, r.status, r.body)
	}
	return st
}

// waitPool waits until the pool's status satisfies cond.
func (e *env) waitPool(name, what string, cond func(api.PoolStatus) bool) api.PoolStatus {
	e.t.Helper()
	var st api.PoolStatus
	testutil.Eventually(e.t, 30*time.Second, func() bool {
		st = e.poolStatus(name)
		return cond(st)
	}, "pool %s: %s", name, what)
	return st
}

// poolStays checks that the pool's status keeps satisfying ok for d: a
// bounded wait for the change that breaks it (a create started past a
// target), which fails the test as soon as it comes.
func (e *env) poolStays(name, what string, d time.Duration, ok func(api.PoolStatus) bool) {
	e.t.Helper()
	var st api.PoolStatus
	if testutil.Poll(e.t.Context(), d, func() bool { st = e.poolStatus(name); return !ok(st) }) {
		e.t.Errorf("pool %s, %s: status %+v", name, what, st)
	}
}

// take creates a sandbox from a spec naming a pool.
func (e *env) take(spec string) api.SandboxInfo {
	e.t.Helper()
	r := e.json("POST", "/v1/sandboxes", spec)
	var info api.SandboxInfo
	if err := json.Unmarshal(r.body, &info); r.status != http.StatusCreated || err != nil {
		e.t.Fatalf("create %s: %d %s", spec, r.status, r.body)
	}
	return info
}

func idleIs(n int64) func(api.PoolStatus) bool {
	return func(st api.PoolStatus) bool { return st.Idle == n && st.Creating == 0 }
}

// TestPoolFillAndRefill: a pool fills to initial, refills to min_idle
// after takes, and a deleted sandbox is destroyed, not returned.
func TestPoolFillAndRefill(t *testing.T) {
	var mu sync.Mutex
	var creates []server.CreateStats
	var takes []server.AcquireStats
	e := newPoolEnv(t, server.Options{Observer: &server.Observer{
		Create:  func(s server.CreateStats) { mu.Lock(); creates = append(creates, s); mu.Unlock() },
		Acquire: func(s server.AcquireStats) { mu.Lock(); takes = append(takes, s); mu.Unlock() },
	}})
	e.definePool(`{"name":"py","spec":{"labels":{"tier":"warm"}},"initial":3,"min_idle":2}`)
	e.waitPool("py", "3 idle at start", idleIs(3))

	a := e.take(`{"pool":"py"}`)
	b := e.take(`{"pool":"py"}`)
	if a.ID == b.ID || a.Pool != "py" || a.Labels["tier"] != "warm" || a.Runtime != "local" {
		t.Errorf("taken: %+v and %+v", a, b)
	}
	// 1 idle left; min_idle brings it back to 2, not to initial's 3.
	st := e.waitPool("py", "refilled to min_idle", idleIs(2))
	if st.HandedOut != 2 || st.Hits != 2 || st.Misses != 0 {
		t.Errorf("status after two takes: %+v", st)
	}
	e.poolStays("py", "min_idle 2 after the refill", 200*time.Millisecond, func(st api.PoolStatus) bool {
		return st.Idle+st.Creating <= 2
	})

	if r := e.json("DELETE", "/v1/sandboxes/"+a.ID, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(a.Workspace); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace of a deleted pooled sandbox: %v (destroyed, never returned)", err)
	}
	st = e.poolStatus("py")
	if st.HandedOut != 1 || st.Idle != 2 {
		t.Errorf("status after a delete: %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(takes) != 2 || !takes[0].Hit || takes[0].Pool != "py" || takes[0].Duration <= 0 {
		t.Errorf("acquire stats %+v", takes)
	}
	if len(creates) != 2 || creates[0].Outcome != "pooled" || creates[0].Pool != "py" || creates[0].Runtime != "local" {
		t.Errorf("create stats %+v", creates)
	}
}

// TestPoolMax: the pool never holds more than max sandboxes, idle,
// being made and handed out together.
func TestPoolMax(t *testing.T) {
	e := newPoolEnv(t, server.Options{})
	e.definePool(`{"name":"m","min_idle":2,"max":3}`)
	e.waitPool("m", "2 idle", idleIs(2))
	var ids []string
	for range 2 {
		ids = append(ids, e.take(`{"pool":"m"}`).ID)
	}
	// The refill within max (one), then the third take is of it: taken
	// while its create is in flight, the pool is at its max (429).
	e.waitPool("m", "one refilled within max", idleIs(1))
	ids = append(ids, e.take(`{"pool":"m"}`).ID)
	e.poolStays("m", "at max", 300*time.Millisecond, func(st api.PoolStatus) bool {
		return st.Idle+st.Creating+st.HandedOut <= 3 && st.HandedOut == 3
	})
	wantError(t, "take at max", e.json("POST", "/v1/sandboxes", `{"pool":"m"}`),
		http.StatusTooManyRequests, api.CodeResourceExhausted, "pool")
	e.json("DELETE", "/v1/sandboxes/"+ids[0], "")
	e.waitPool("m", "one refilled within max", func(st api.PoolStatus) bool {
		return st.Idle == 1 && st.HandedOut == 2 && st.Creating == 0
	})
}

// TestPoolFallback: an empty pool makes a fresh sandbox from its
// template (create), or refuses (fail).
func TestPoolFallback(t *testing.T) {
	var mu sync.Mutex
	var creates []server.CreateStats
	var takes []server.AcquireStats
	e := newPoolEnv(t, server.Options{Observer: &server.Observer{
		Create:  func(s server.CreateStats) { mu.Lock(); creates = append(creates, s); mu.Unlock() },
		Acquire: func(s server.AcquireStats) { mu.Lock(); takes = append(takes, s); mu.Unlock() },
	}})
	e.definePool(`{"name":"cold","spec":{"setup":[{"shell":"echo made > made.txt"}]}}`)
	info := e.take(`{"pool":"cold"}`)
	if b, err := os.ReadFile(filepath.Join(info.Workspace, "made.txt")); err != nil || string(b) != "made\n" {
		t.Errorf("fallback create did not run the template's setup: %q %v", b, err)
	}
	if st := e.poolStatus("cold"); st.Misses != 1 || st.HandedOut != 1 || st.Idle != 0 {
		t.Errorf("status after a fallback create: %+v", st)
	}

	e.definePool(`{"name":"strict","min_idle":1,"max":1,"fallback":"fail"}`)
	e.waitPool("strict", "1 idle", idleIs(1))
	e.take(`{"pool":"strict"}`)
	r := wantError(t, "take from an empty pool with fallback fail", e.json("POST", "/v1/sandboxes", `{"pool":"strict"}`),
		http.StatusTooManyRequests, api.CodeResourceExhausted, "pool")
	if r != nil && !strings.Contains(r.Message, "fallback fail") {
		t.Errorf("message %q", r.Message)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"created", "pooled", "error:resource_exhausted"}
	var got []string
	for _, c := range creates {
		got = append(got, c.Outcome)
	}
	if !slices.Equal(got, want) || len(takes) != 3 || takes[0].Hit || !takes[1].Hit || takes[2].Hit {
		t.Errorf("create outcomes %q (want %q), takes %+v", got, want, takes)
	}
}

// TestPoolLateBinding: env, labels and files of the take reach the
// sandbox's commands, under each request's own env.
func TestPoolLateBinding(t *testing.T) {
	e := newPoolEnv(t, server.Options{})
	e.definePool(`{"name":"lb","min_idle":1,"spec":{"env":{"A":"template","B":"template"},"labels":{"k":"t","keep":"t"}}}`)
	e.waitPool("lb", "1 idle", idleIs(1))
	info := e.take(`{"pool":"lb","env":{"B":"take","C":"take"},"labels":{"k":"take"},
		"assets":[{"path":"in/f.txt","content":{"text":"hello"},"mode":"0600"}]}`)
	if st := e.poolStatus("lb"); st.Hits != 1 {
		t.Fatalf("not a warm take: %+v", st)
	}
	if info.Labels["k"] != "take" || info.Labels["keep"] != "t" {
		t.Errorf("labels %v", info.Labels)
	}
	c, _ := client.New(e.ts.URL)
	sb, err := c.Sandbox(t.Context(), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{
		Shell: `echo $A $B $C $D; cat in/f.txt; echo; stat -c %a in/f.txt`,
		Env:   map[string]string{"D": "req"},
	})
	if want := "template take take req\nhello\n600\n"; err != nil || res.Stdout.Text() != want {
		t.Errorf("exec: %q %v, want %q", res.Stdout.Text(), err, want)
	}
	res, _ = sb.Exec(t.Context(), execbox.ExecRequest{Shell: `echo $C`, Env: map[string]string{"C": "req"}})
	if res.Stdout.Text() != "req\n" {
		t.Errorf("the request's env must win over the take's: %q", res.Stdout.Text())
	}
	p, err := sb.Start(t.Context(), execbox.ExecRequest{Shell: `echo $C`})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.Wait(t.Context()); err != nil || res.Stdout.Text() != "take\n" {
		t.Errorf("process: %q %v", res.Stdout.Text(), err)
	}
	sess, err := execbox.OpenSession(t.Context(), sb, execbox.SessionOptions{Kind: execbox.SessionBash})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if res, err := sess.Run(t.Context(), execbox.SessionRequest{Code: "echo $C"}); err != nil || res.Stdout.Text() != "take\n" {
		t.Errorf("session: %q %v", res.Stdout.Text(), err)
	}
}

// TestPoolNoDoubleHandOut: concurrent takes never get the same sandbox.
func TestPoolNoDoubleHandOut(t *testing.T) {
	e := newPoolEnv(t, server.Options{})
	const warm, takers = 6, 12
	e.definePool(fmt.Sprintf(`{"name":"race","initial":%d}`, warm))
	e.waitPool("race", "all idle", idleIs(warm))
	ids := make([]string, takers)
	var wg sync.WaitGroup
	for i := range takers {
		wg.Go(func() {
			r := e.json("POST", "/v1/sandboxes", `{"pool":"race"}`)
			var info api.SandboxInfo
			if err := json.Unmarshal(r.body, &info); r.status != http.StatusCreated || err != nil {
				t.Errorf("take %d: %d %s", i, r.status, r.body)
			}
			ids[i] = info.ID
		})
	}
	wg.Wait()
	slices.Sort(ids)
	if n := len(slices.Compact(slices.Clone(ids))); n != takers {
		t.Errorf("%d distinct sandboxes for %d takes: %q", n, takers, ids)
	}
	st := e.poolStatus("race")
	if st.Hits+st.Misses != takers || st.Hits > warm || st.HandedOut != takers {
		t.Errorf("status %+v", st)
	}
}

// TestPoolBackoff: a template whose setup fails is retried with a
// growing wait, and its last error is in the status.
func TestPoolBackoff(t *testing.T) {
	e := newPoolEnv(t, server.Options{})
	e.definePool(`{"name":"bad","min_idle":2,"spec":{"setup":[{"shell":"echo broken >&2; exit 3"}]}}`)
	st := e.waitPool("bad", "2 failures", func(st api.PoolStatus) bool { return st.Failures >= 2 })
	if st.LastError == nil || st.LastError.Code != api.CodeInvalidArgument || !strings.Contains(st.LastError.Message, "broken") ||
		st.RetryAt == nil || st.LastErrorAt == nil || st.Idle != 0 {
		t.Fatalf("status of a failing pool: %+v (error %+v)", st, st.LastError)
	}
	// Without backoff, a local create failing in milliseconds would fail
	// hundreds of times a second. With it, the n-th failure in a row
	// sets a wait of 100 ms doubled n-1 times (its upper half jittered),
	// and the next failure comes no sooner: each is checked as it comes,
	// whatever the machine's speed.
	for range 2 {
		n := st.Failures
		next := e.waitPool("bad", "the next failure", func(st api.PoolStatus) bool { return st.Failures > n })
		if next.Failures != n+1 || next.LastErrorAt == nil || next.LastErrorAt.Before(*st.RetryAt) {
			t.Errorf("failure %d came at %v, before its retry at %v", next.Failures, next.LastErrorAt, st.RetryAt)
		}
		if wait, least := next.RetryAt.Sub(*next.LastErrorAt), 100*time.Millisecond<<(next.Failures-1)/2; wait < least-time.Millisecond {
			t.Errorf("after failure %d the pool waits %v, want at least %v", next.Failures, wait, least)
		}
		st = next
	}
}

// TestPoolDelete: deleting a pool closes its idle sandboxes and leaves
// the taken ones to their callers; Server.Close closes the idle ones of
// the others.
func TestPoolDelete(t *testing.T) {
	made := filepath.Join(t.TempDir(), "made")
	e := newPoolEnv(t, server.Options{})
	spec := fmt.Sprintf(`{"setup":[{"shell":"pwd >> %s"}]}`, made)
	e.definePool(`{"name":"d","min_idle":2,"spec":` + spec + `}`)
	e.definePool(`{"name":"other","min_idle":1,"spec":` + spec + `}`)
	e.waitPool("d", "2 idle", idleIs(2))
	e.waitPool("other", "1 idle", idleIs(1))
	taken := e.take(`{"pool":"d"}`)
	e.waitPool("d", "refilled", idleIs(2))
	if r := e.json("DELETE", "/v1/pools/d", ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE pool: %d %s", r.status, r.body)
	}
	wantError(t, "GET a deleted pool", e.json("GET", "/v1/pools/d", ""), http.StatusNotFound, api.CodeNotFound, "pool")
	wantError(t, "take from a deleted pool", e.json("POST", "/v1/sandboxes", `{"pool":"d"}`), http.StatusNotFound, api.CodeNotFound, "pool")
	wantError(t, "DELETE twice", e.json("DELETE", "/v1/pools/d", ""), http.StatusNotFound, api.CodeNotFound, "pool")
	if r := e.json("POST", "/v1/sandboxes/"+taken.ID+"/exec", `{"command":["true"]}`); r.status != http.StatusOK {
		t.Errorf("the taken sandbox after its pool's delete: %d %s", r.status, r.body)
	}
	var list api.PoolList
	if r := e.json("GET", "/v1/pools", ""); json.Unmarshal(r.body, &list) != nil || len(list.Pools) != 1 || list.Pools[0].Name != "other" {
		t.Errorf("GET /v1/pools: %s", r.body)
	}

	e.ts.Close()
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(made)
	if err != nil {
		t.Fatal(err)
	}
	dirs := strings.Fields(string(b))
	if len(dirs) < 4 {
		t.Fatalf("workspaces made: %q", dirs)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("workspace %s of a pool sandbox after the pool's delete and Close: %v", d, err)
		}
	}
}

// TestPoolSpecMismatch: a take may vary env, labels and files only.
func TestPoolSpecMismatch(t *testing.T) {
	e := newPoolEnv(t, server.Options{})
	e.definePool(`{"name":"t","spec":{"env_policy":"clean","limits":{"open_files":256},"setup":[{"command":["true"]}]}}`)
	for _, c := range []struct {
		spec   string
		fields []string
	}{
		{`{"pool":"t","image":"alpine"}`, []string{"image"}},
		{`{"pool":"t","limits":{"open_files":512},"env_policy":"inherit"}`, []string{"limits", "env_policy"}},
		{`{"pool":"t","setup":[{"command":["false"]}]}`, []string{"setup"}},
		{`{"pool":"t","workspace":"/tmp"}`, []string{"workspace"}},
		{`{"pool":"t","user":{"uid":1}}`, []string{"user"}},
		{`{"pool":"t","assets":[{"path":"x","source":"/etc/hostname"}]}`, []string{"assets[0].source"}},
	} {
		wantError(t, c.spec, e.json("POST", "/v1/sandboxes", c.spec), http.StatusBadRequest, api.CodeInvalidArgument, c.fields...)
	}
	wantError(t, "other runtime", e.json("POST", "/v1/sandboxes?runtime=local", `{"pool":"nope"}`), http.StatusNotFound, api.CodeNotFound, "pool")
	wantError(t, "bad pool name", e.json("POST", "/v1/sandboxes", `{"pool":"a b"}`), http.StatusBadRequest, api.CodeInvalidArgument, "pool")
	// The template's own values are accepted.
	e.take(`{"pool":"t","env_policy":"clean","limits":{"open_files":256},"setup":[{"command":["true"]}]}`)
}

// TestPoolDefinitionErrors: a bad pool is refused whole, naming each
// field.
func TestPoolDefinitionErrors(t *testing.T) {
	e := newPoolEnv(t, server.Options{})
	wantError(t, "bad pool", e.json("POST", "/v1/pools",
		`{"name":"a b","initial":-1,"min_idle":5,"max":2,"fallback":"maybe","spec":{"pool":"x","limits":{"pids":-1}}}`),
		http.StatusBadRequest, api.CodeInvalidArgument,
		"name", "initial", "min_idle", "fallback", "spec.pool", "spec.limits.pids")
	wantError(t, "unknown runtime", e.json("POST", "/v1/pools", `{"name":"r","runtime":"nope"}`),
		http.StatusNotFound, api.CodeNotFound, "runtime")
	wantError(t, "host path", e.json("POST", "/v1/pools", `{"name":"h","spec":{"workspace":"/tmp"}}`),
		http.StatusForbidden, api.CodePermissionDenied, "spec.workspace")
	wantError(t, "limit the runtime lacks", e.json("POST", "/v1/pools", `{"name":"l","spec":{"limits":{"memory":1000000}}}`),
		http.StatusNotImplemented, api.CodeUnsupported, "spec.limits.memory")
	wantError(t, "unknown field", e.json("POST", "/v1/pools", `{"name":"u","min_idel":1}`),
		http.StatusBadRequest, api.CodeInvalidArgument)
	e.definePool(`{"name":"dup"}`)
	wantError(t, "duplicate", e.json("POST", "/v1/pools", `{"name":"dup"}`), http.StatusBadRequest, api.CodeInvalidArgument, "name")

	_, err := server.New([]execbox.Runtime{local.New(local.Options{})}, server.Options{
		Pools: []api.Pool{{Name: "ok"}, {Name: "bad", MinIdle: -1}},
	})
	var fe *execbox.FieldError
	if !errors.As(err, &fe) || fe.Field != "pools[1].min_idle" {
		t.Errorf("server.New with a bad pool: %v", err)
	}
}

// TestPoolRefusedInProcess: runtimes without pools refuse Spec.Pool; the
// remote runtime takes from the server's pool.
func TestPoolRefusedInProcess(t *testing.T) {
	_, err := local.New(local.Options{}).Create(t.Context(), execbox.Spec{Pool: "p"})
	var fe *execbox.FieldError
	if !errors.Is(err, execbox.ErrUnsupported) || !errors.As(err, &fe) || fe.Field != "pool" {
		t.Errorf("local Create with a pool: %v", err)
	}
	e := newPoolEnv(t, server.Options{Pools: []api.Pool{{Name: "r", MinIdle: 1}}})
	e.waitPool("r", "1 idle", idleIs(1))
	rt, err := remote.New(remote.Options{URL: e.ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := rt.Create(t.Context(), execbox.Spec{Pool: "r", Env: map[string]string{"X": "late"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "echo $X"})
	if err != nil || res.Stdout.Text() != "late\n" {
		t.Errorf("exec in a remote pooled sandbox: %q %v", res.Stdout.Text(), err)
	}
	if st := e.poolStatus("r"); st.Hits != 1 {
		t.Errorf("status %+v", st)
	}
}

// TestPoolSandboxRuntime: a pool of the sandbox runtime hands out warm
// sandboxes with the take's env and files.
func TestPoolSandboxRuntime(t *testing.T) {
	testutil.Require(t, testutil.UserNamespaces, testutil.CgroupV1orV2)
	state := t.TempDir()
	rt := sandbox.New(sandbox.Options{Logger: testutil.Logger(t), StateDir: filepath.Join(state, "state")})
	if h := rt.Health(t.Context()); !h.Available {
		t.Fatalf("sandbox runtime unavailable on a machine with user namespaces and cgroups: %s", h.Detail)
	}
	_, err := rt.Create(t.Context(), execbox.Spec{Pool: "iso"})
	var fe *execbox.FieldError
	if !errors.Is(err, execbox.ErrUnsupported) || !errors.As(err, &fe) || fe.Field != "pool" {
		t.Errorf("sandbox runtime Create with a pool: %v", err)
	}
	e := newPoolEnv(t, server.Options{}, rt)
	e.definePool(`{"name":"iso","min_idle":2,"spec":{"limits":{"pids":64}}}`)
	e.waitPool("iso", "2 idle", idleIs(2))
	info := e.take(`{"pool":"iso","env":{"X":"late"},"assets":[{"path":"f","content":{"text":"hi"}}]}`)
	c, _ := client.New(e.ts.URL)
	sb, err := c.Sandbox(t.Context(), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(t.Context(), execbox.ExecRequest{Shell: "echo $X; cat f"})
	if err != nil || res.Stdout.Text() != "late\nhi" {
		t.Errorf("exec: %q %v", res.Stdout.Text(), err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	e.waitPool("iso", "refilled", func(st api.PoolStatus) bool { return st.Idle == 2 && st.HandedOut == 0 })
}
