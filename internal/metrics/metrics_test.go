package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/metrics"
	"github.com/execbox/execbox/internal/server"
	xtestutil "github.com/execbox/execbox/internal/testutil"
	"github.com/execbox/execbox/runtimes/local"
)

const token = "metrics-test-token"

// newServer is a server of the local runtime with its metrics, on
// loopback, behind token.
func newServer(t *testing.T) (*httptest.Server, *metrics.Metrics) {
	t.Helper()
	rt := local.New(local.Options{})
	m := metrics.New([]string{rt.Name()})
	srv, err := server.New([]execbox.Runtime{rt}, server.Options{
		Logger: xtestutil.Logger(t), Token: token, Observer: m.Observer(), Metrics: m.Handler(),
	})
	if err != nil {
		t.Fatal(err)
	}
	m.WatchLive(srv)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("server Close: %v", err)
		}
	})
	return ts, m
}

// scrape GETs url (with tok, if not empty) and parses the text format.
func scrape(t *testing.T, url, tok string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET %s: Content-Type %q, want the text format", url, ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: parsing the text format: %v", url, err)
	}
	return mfs
}

// find returns the metric of family name whose labels include want, or nil.
func find(mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
	for _, m := range mf.GetMetric() {
		ok := true
		for k, v := range want {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			return m
		}
	}
	return nil
}

// value returns a counter's or gauge's value, or a histogram's count.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := find(mfs, name, labels)
	if m == nil {
		t.Errorf("no %s%v", name, labels)
		return -1
	}
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	t.Errorf("%s%v: not a counter, gauge or histogram", name, labels)
	return -1
}

// TestMetrics: a create, an exec, a failed lookup, a refused request and a
// delete through a real server of the local runtime move the metrics
// they should, under the labels they should, and no label carries an ID.
func TestMetrics(t *testing.T) {
	ts, _ := newServer(t)
	ctx := t.Context()
	c, err := client.New(ts.URL, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const reqID = "req-3f1c-metrics"
	sb, err := c.Create(api.WithRequestID(ctx, reqID), execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(api.WithRequestID(ctx, reqID), execbox.ExecRequest{Command: []string{"sleep", "0.05"}})
	if err != nil || res.Reason != execbox.ReasonExited {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	if _, err := c.Sandbox(ctx, "sb-no-such-one"); err == nil {
		t.Fatal("a sandbox that does not exist was found")
	}
	bad, _ := client.New(ts.URL, client.WithToken("wrong"))
	if _, err := bad.Sandboxes(ctx); err == nil {
		t.Fatal("a wrong token was accepted")
	}

	mfs := scrape(t, ts.URL+"/metrics", token)
	rt := "local"
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"execbox_http_requests_total", map[string]string{"route": "POST /v1/sandboxes", "code": "201"}, 1},
		{"execbox_http_requests_total", map[string]string{"route": "POST /v1/sandboxes/{sandbox}/exec", "code": "200"}, 1},
		{"execbox_http_requests_total", map[string]string{"route": "GET /v1/sandboxes/{sandbox}", "code": "404"}, 1},
		// Refused before routing: still the route, never the path.
		{"execbox_http_requests_total", map[string]string{"route": "GET /v1/sandboxes", "code": "401"}, 1},
		{"execbox_exec_duration_seconds", map[string]string{"runtime": rt, "outcome": "exited"}, 1},
		{"execbox_sandbox_create_duration_seconds", map[string]string{"runtime": rt, "outcome": "created"}, 1},
		{"execbox_sandboxes_live", map[string]string{"runtime": rt}, 1},
		{"execbox_sandboxes_closed_total", map[string]string{"runtime": rt, "reason": "deleted"}, 0},
		{"execbox_sandboxes_closed_total", map[string]string{"runtime": rt, "reason": "timeout"}, 0},
		{"execbox_sandboxes_closed_total", map[string]string{"runtime": rt, "reason": "idle"}, 0},
	} {
		if got := value(t, mfs, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	h := find(mfs, "execbox_exec_duration_seconds", map[string]string{"runtime": rt, "outcome": "exited"}).GetHistogram()
	if s := h.GetSampleSum(); s < 0.05 || s > 10 {
		t.Errorf("exec of sleep 0.05 measured %vs", s)
	}
	for _, fam := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes", "process_open_fds"} {
		if mfs[fam] == nil {
			t.Errorf("no %s: the Go and process collectors are missing", fam)
		}
	}

	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	mfs = scrape(t, ts.URL+"/metrics", token)
	if got := value(t, mfs, "execbox_sandboxes_live", map[string]string{"runtime": rt}); got != 0 {
		t.Errorf("live sandboxes after the delete: %v, want 0", got)
	}
	if got := value(t, mfs, "execbox_sandboxes_closed_total", map[string]string{"runtime": rt, "reason": "deleted"}); got != 1 {
		t.Errorf("closed (deleted): %v, want 1", got)
	}
	noIDs(t, mfs, sb.ID(), "sb-no-such-one", reqID)
}

// noIDs fails if a label of any metric carries one of ids, or a route a
// path rather than a pattern.
func noIDs(t *testing.T, mfs map[string]*dto.MetricFamily, ids ...string) {
	t.Helper()
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				for _, id := range ids {
					if strings.Contains(lp.GetValue(), id) {
						t.Errorf("%s: label %s=%q carries the ID %q", name, lp.GetName(), lp.GetValue(), id)
					}
				}
				if lp.GetName() == "route" && strings.Contains(lp.GetValue(), "/sandboxes/") && !strings.Contains(lp.GetValue(), "{sandbox}") {
					t.Errorf("%s: route %q is not a pattern", name, lp.GetValue())
				}
			}
		}
	}
}

// TestMetricsNeedToken: /metrics on the API's address is the operator's:
// without the token it answers 401 and shows nothing.
func TestMetricsNeedToken(t *testing.T) {
	ts, _ := newServer(t)
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(b), "execbox_") {
		t.Errorf("GET /metrics without the token: %s %q", resp.Status, b)
	}
}

// TestPoolMetrics: the pool gauges read their source at each scrape, and
// acquires land in the histogram by pool and result. (The pools of
// execbox serve feed both once wired; here a PoolFunc stands in for the
// server's statistics, and the Observer's Acquire is called as a pool
// would.)
func TestPoolMetrics(t *testing.T) {
	ts, m := newServer(t)
	sizes := []metrics.PoolSize{{Pool: "py", Idle: 2, Creating: 1, Desired: 3, Max: 8}}
	m.WatchPools(metrics.PoolFunc(func() []metrics.PoolSize { return sizes }))
	obs := m.Observer()
	obs.Acquire(server.AcquireStats{Pool: "py", Hit: true, Duration: 200 * time.Microsecond})
	obs.Acquire(server.AcquireStats{Pool: "py", Hit: false, Duration: 300 * time.Millisecond})
	obs.Closed(server.ClosedStats{Runtime: "local", Reason: "idle"})

	mfs := scrape(t, ts.URL+"/metrics", token)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"execbox_pool_sandboxes", map[string]string{"pool": "py", "state": "idle"}, 2},
		{"execbox_pool_sandboxes", map[string]string{"pool": "py", "state": "creating"}, 1},
		{"execbox_pool_desired_sandboxes", map[string]string{"pool": "py"}, 3},
		{"execbox_pool_max_sandboxes", map[string]string{"pool": "py"}, 8},
		{"execbox_pool_acquire_duration_seconds", map[string]string{"pool": "py", "result": "hit"}, 1},
		{"execbox_pool_acquire_duration_seconds", map[string]string{"pool": "py", "result": "miss"}, 1},
		{"execbox_sandboxes_closed_total", map[string]string{"runtime": "local", "reason": "idle"}, 1},
	} {
		if got := value(t, mfs, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	sizes[0].Idle = 0
	mfs = scrape(t, ts.URL+"/metrics", token)
	if got := value(t, mfs, "execbox_pool_sandboxes", map[string]string{"pool": "py", "state": "idle"}); got != 0 {
		t.Errorf("idle after the source changed: %v, want 0", got)
	}
	// A hit of a warm pool lands in the sub-millisecond buckets.
	h := find(mfs, "execbox_pool_acquire_duration_seconds", map[string]string{"pool": "py", "result": "hit"}).GetHistogram()
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == 0.00025 && b.GetCumulativeCount() != 1 {
			t.Errorf("a 200µs hit is not in the 250µs bucket: %v", b)
		}
	}
}

// TestPoolLabelBounded: pool names past the bound are counted as "other",
// so the registry cannot grow without end.
func TestPoolLabelBounded(t *testing.T) {
	m := metrics.New(nil)
	obs := m.Observer()
	for i := range 200 {
		obs.Acquire(server.AcquireStats{Pool: "p" + string(rune('a'+i%26)) + strings.Repeat("x", i), Hit: true})
	}
	n, err := testutil.GatherAndCount(m.Registry(), "execbox_pool_acquire_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if n != 65 {
		t.Errorf("%d series of acquires for 200 pools, want 64 and other", n)
	}
}

// TestMetricsLint: the metrics follow Prometheus' naming conventions.
func TestMetricsLint(t *testing.T) {
	m := metrics.New([]string{"local"})
	obs := m.Observer()
	obs.Request(server.RequestStats{Route: "GET /v1/health", Status: 200})
	obs.Exec(server.ExecStats{Runtime: "local", Outcome: "exited"})
	obs.Create(server.CreateStats{Runtime: "local", Outcome: "created"})
	obs.Acquire(server.AcquireStats{Pool: "p", Hit: true})
	m.WatchPools(metrics.PoolFunc(func() []metrics.PoolSize { return []metrics.PoolSize{{Pool: "p"}} }))
	m.WatchLive(liveFunc(func() map[string]int { return map[string]int{"local": 1} }))
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "execbox_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

type liveFunc func() map[string]int

func (f liveFunc) LiveSandboxes() map[string]int { return f() }
