// Package metrics turns the measurements of execbox serve
// (server.Observer) into Prometheus metrics on a registry of its own, and
// serves them in the Prometheus text format. It is a package apart so
// that only execbox serve links Prometheus into its request path: agents
// link internal/server, not this.
//
// No label carries an ID (sandbox, process, session, request) or
// anything a client chose freely: routes are the matched patterns,
// runtimes and pools the server's configured names, outcomes the
// protocol's reasons and error codes.
package metrics

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/execbox/execbox/internal/server"
)

// Histogram buckets, in seconds. Execs of a trivial command take a few
// milliseconds and agent work can take an hour; creates take tens of
// milliseconds (local, sandbox) to minutes (an image pull); a warm
// pool's acquire takes microseconds.
var (
	execBuckets    = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800}
	createBuckets  = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	acquireBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
)

// closedReasons are the reasons of server.ClosedStats, each counted from
// zero so that a rate of reaped sandboxes exists before the first one.
var closedReasons = []string{"deleted", "timeout", "idle", "failed", "shutdown"}

// maxPools bounds the pool label's values: a pool name comes from the
// server's configuration, but a bound keeps a bug from growing the
// registry without end. Names past it are counted as "other".
const maxPools = 64

// Metrics holds execbox serve's metrics. Observer feeds them; Handler
// serves them.
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	execs    *prometheus.HistogramVec
	creates  *prometheus.HistogramVec
	closed   *prometheus.CounterVec
	acquires *prometheus.HistogramVec

	// The children of requests and execs by label values, found without
	// hashing the labels on every request: each is called on every one.
	requestSeries sync.Map // requestKey → prometheus.Counter
	execSeries    sync.Map // execKey → prometheus.Observer

	mu    sync.Mutex
	pools map[string]bool // pool label values in use, at most maxPools
}

type requestKey struct {
	route  string
	status int
}

type execKey struct{ runtime, outcome string }

// New returns the metrics of a server whose runtimes are named runtimes
// (their counters start at zero), with the Go runtime's and the
// process's collectors.
func New(runtimes []string) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "execbox_http_requests_total",
			Help: "HTTP requests answered, by route (the matched pattern) and status code.",
		}, []string{"route", "code"}),
		execs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "execbox_exec_duration_seconds",
			Help:    "Duration of execs (POST exec), by runtime and outcome (the result's reason, or error:CODE).",
			Buckets: execBuckets,
		}, []string{"runtime", "outcome"}),
		creates: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "execbox_sandbox_create_duration_seconds",
			Help:    "Duration of sandbox creates, by runtime and outcome (created, pooled, or error:CODE).",
			Buckets: createBuckets,
		}, []string{"runtime", "outcome"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "execbox_sandboxes_closed_total",
			Help: "Sandboxes ended, by runtime and reason (deleted, timeout, idle, failed, shutdown); timeout and idle are the reaped.",
		}, []string{"runtime", "reason"}),
		acquires: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "execbox_pool_acquire_duration_seconds",
			Help:    "Duration of takes from a warm pool, by pool and result (hit: a warm sandbox was there; miss).",
			Buckets: acquireBuckets,
		}, []string{"pool", "result"}),
		pools: make(map[string]bool),
	}
	for _, rt := range runtimes {
		for _, reason := range closedReasons {
			m.closed.WithLabelValues(rt, reason)
		}
	}
	m.reg.MustRegister(m.requests, m.execs, m.creates, m.closed, m.acquires,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry the metrics are on, for an embedder's own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format (or what the
// scraper negotiates).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Observer returns the hooks that feed the metrics, for
// server.Options.Observer.
func (m *Metrics) Observer() *server.Observer {
	return &server.Observer{
		Request: m.request,
		Exec:    m.exec,
		Create: func(s server.CreateStats) {
			m.creates.WithLabelValues(s.Runtime, s.Outcome).Observe(s.Duration.Seconds())
		},
		Closed: func(s server.ClosedStats) {
			m.closed.WithLabelValues(s.Runtime, s.Reason).Inc()
		},
		Acquire: m.acquire,
	}
}

func (m *Metrics) request(s server.RequestStats) {
	route := s.Route
	if route == "" {
		route = "unmatched" // the router redirected it (an unclean path)
	}
	k := requestKey{route, s.Status}
	c, ok := m.requestSeries.Load(k)
	if !ok {
		c, _ = m.requestSeries.LoadOrStore(k, m.requests.WithLabelValues(route, strconv.Itoa(s.Status)))
	}
	c.(prometheus.Counter).Inc()
}

func (m *Metrics) exec(s server.ExecStats) {
	k := execKey{s.Runtime, s.Outcome}
	o, ok := m.execSeries.Load(k)
	if !ok {
		o, _ = m.execSeries.LoadOrStore(k, m.execs.WithLabelValues(s.Runtime, s.Outcome))
	}
	o.(prometheus.Observer).Observe(s.Duration.Seconds())
}

func (m *Metrics) acquire(s server.AcquireStats) {
	result := "miss"
	if s.Hit {
		result = "hit"
	}
	m.acquires.WithLabelValues(m.poolLabel(s.Pool), result).Observe(s.Duration.Seconds())
}

// poolLabel returns pool, or "other" once maxPools names are in use.
func (m *Metrics) poolLabel(pool string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pools[pool] {
		return pool
	}
	if len(m.pools) >= maxPools {
		return "other"
	}
	m.pools[pool] = true
	return pool
}
