package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
	"github.com/execbox/execbox/runtimes/sandbox"
)

// BenchmarkPoolAcquire measures, in the same run, a create taking a warm
// sandbox from a pool and a create making one from the same template,
// each a POST /v1/sandboxes over loopback (the delete after each is not
// timed, nor the wait for the pool to refill). It reports the p50 of
// both and their ratio, and the p50 of the server's own part of a take
// (the Observer's AcquireStats: from the request's decoded spec to the
// sandbox in hand), and of a create naming an unknown pool, the
// protocol's floor; the target is an acquire p50 at or under 1 ms.
func BenchmarkPoolAcquire(b *testing.B) {
	b.Run("local", func(b *testing.B) {
		benchAcquire(b, local.New(local.Options{}))
	})
	b.Run("sandbox", func(b *testing.B) {
		testutil.Require(b, testutil.UserNamespaces, testutil.CgroupV1orV2)
		rt := sandbox.New(sandbox.Options{StateDir: filepath.Join(b.TempDir(), "state")})
		if h := rt.Health(b.Context()); !h.Available {
			b.Fatalf("sandbox runtime unavailable: %s", h.Detail)
		}
		benchAcquire(b, rt)
	})
}

func benchAcquire(b *testing.B, rt execbox.Runtime) {
	const template = `{"env":{"TEMPLATE":"1"},"limits":{"open_files":1024}}`
	var mu sync.Mutex
	var takes []time.Duration // the server's own time, from the Observer
	srv, err := server.New([]execbox.Runtime{rt}, server.Options{Observer: &server.Observer{
		Acquire: func(s server.AcquireStats) { mu.Lock(); takes = append(takes, s.Duration); mu.Unlock() },
	}})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			b.Error(err)
		}
	}()
	post := func(path, body string) (string, time.Duration) {
		start := time.Now()
		resp, err := http.Post(ts.URL+path, api.ContentJSON, strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var info api.SandboxInfo
		err = json.NewDecoder(resp.Body).Decode(&info)
		_, _ = io.Copy(io.Discard, resp.Body) // to EOF: the connection is reused
		resp.Body.Close()
		d := time.Since(start)
		if err != nil || resp.StatusCode >= 300 {
			b.Fatalf("POST %s %s: %d %v", path, body, resp.StatusCode, err)
		}
		return info.ID, d
	}
	del := func(id string) {
		req, _ := http.NewRequest("DELETE", ts.URL+"/v1/sandboxes/"+id, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	post("/v1/pools", `{"name":"bench","min_idle":2,"spec":`+template+`}`)
	// warm waits for the pool to be full and idle, no refill running, and
	// gives the newest sandbox's processes 100 ms to settle: a pool warm
	// for some time, as a server's usually is.
	warm := func() {
		ok := testutil.Poll(b.Context(), time.Minute, func() bool {
			st := srv.PoolStats()
			return len(st) == 1 && st[0].Idle == 2 && st[0].Creating == 0
		})
		if !ok {
			b.Fatalf("pool not refilled: %+v", srv.PoolStats())
		}
		time.Sleep(100 * time.Millisecond)
	}

	// floor is a create naming no pool the server has, answered at the
	// pool's lookup (404): the protocol's floor for a create on this
	// machine, the same request but for the name.
	floor := func() time.Duration {
		start := time.Now()
		resp, err := http.Post(ts.URL+"/v1/sandboxes", api.ContentJSON, strings.NewReader(`{"pool":"nope","env":{"LATE":"1"}}`))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != http.StatusNotFound {
			b.Fatalf("create from an unknown pool: %d", resp.StatusCode)
		}
		return d
	}
	var acquire, create, floors []time.Duration
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		warm()
		floors = append(floors, floor())
		b.StartTimer()
		id, d := post("/v1/sandboxes", `{"pool":"bench","env":{"LATE":"1"}}`)
		b.StopTimer()
		acquire = append(acquire, d)
		del(id)
		b.StartTimer()
		id, d = post("/v1/sandboxes", template)
		b.StopTimer()
		create = append(create, d)
		del(id)
		b.StartTimer()
	}
	st := srv.PoolStats()[0]
	if st.Misses != 0 {
		b.Errorf("%d of the takes found the pool empty", st.Misses)
	}
	pa, pc := p50(acquire), p50(create)
	mu.Lock()
	b.ReportMetric(float64(p50(takes).Microseconds()), "server-take-p50-µs")
	mu.Unlock()
	b.ReportMetric(float64(p50(floors).Microseconds())/1000, "floor-p50-ms")
	b.ReportMetric(float64(pa.Microseconds())/1000, "acquire-p50-ms")
	b.ReportMetric(float64(pc.Microseconds())/1000, "create-p50-ms")
	b.ReportMetric(float64(pc)/float64(pa), "create/acquire")
}

func p50(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
