package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// LiveSource is what the live-sandboxes gauge reads at each scrape:
// *server.Server.
type LiveSource interface {
	LiveSandboxes() map[string]int
}

// PoolSize is one warm pool's counts at a scrape.
type PoolSize struct {
	Pool string
	// Idle sandboxes are warm and ready to hand out; Creating ones are
	// being made.
	Idle, Creating int
	// Desired is the pool's minimum of idle sandboxes, Max its most.
	Desired, Max int
}

// PoolSource is what the pool gauges read at each scrape.
type PoolSource interface {
	PoolSizes() []PoolSize
}

// PoolFunc makes a function a PoolSource: an adapter from the server's
// own pool statistics.
type PoolFunc func() []PoolSize

// PoolSizes implements PoolSource.
func (f PoolFunc) PoolSizes() []PoolSize { return f() }

var (
	liveDesc = prometheus.NewDesc("execbox_sandboxes_live",
		"Sandboxes the server holds, by runtime.", []string{"runtime"}, nil)
	poolDesc = prometheus.NewDesc("execbox_pool_sandboxes",
		"Sandboxes of a warm pool not yet handed out, by pool and state (idle, creating).", []string{"pool", "state"}, nil)
	poolDesiredDesc = prometheus.NewDesc("execbox_pool_desired_sandboxes",
		"The idle sandboxes a warm pool keeps, by pool.", []string{"pool"}, nil)
	poolMaxDesc = prometheus.NewDesc("execbox_pool_max_sandboxes",
		"The most sandboxes a warm pool holds, by pool.", []string{"pool"}, nil)
)

// WatchLive registers execbox_sandboxes_live, read from src at each
// scrape. Call it once.
func (m *Metrics) WatchLive(src LiveSource) {
	m.reg.MustRegister(liveCollector{src})
}

// WatchPools registers the pool gauges, read from src at each scrape.
// Call it once.
func (m *Metrics) WatchPools(src PoolSource) {
	m.reg.MustRegister(poolCollector{src})
}

type liveCollector struct{ src LiveSource }

func (c liveCollector) Describe(ch chan<- *prometheus.Desc) { ch <- liveDesc }

func (c liveCollector) Collect(ch chan<- prometheus.Metric) {
	for rt, n := range c.src.LiveSandboxes() {
		ch <- prometheus.MustNewConstMetric(liveDesc, prometheus.GaugeValue, float64(n), rt)
	}
}

type poolCollector struct{ src PoolSource }

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolDesc
	ch <- poolDesiredDesc
	ch <- poolMaxDesc
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	sizes := c.src.PoolSizes()
	if len(sizes) > maxPools {
		sizes = sizes[:maxPools]
	}
	for _, p := range sizes {
		ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(p.Idle), p.Pool, "idle")
		ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(p.Creating), p.Pool, "creating")
		ch <- prometheus.MustNewConstMetric(poolDesiredDesc, prometheus.GaugeValue, float64(p.Desired), p.Pool)
		ch <- prometheus.MustNewConstMetric(poolMaxDesc, prometheus.GaugeValue, float64(p.Max), p.Pool)
	}
}
