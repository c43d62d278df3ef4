package store

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// PoolCollector exports the pgx pool's statistics, so that SREs can see
// connection saturation before it turns into latency.
type PoolCollector struct {
	pool                                                 *pgxpool.Pool
	acquired, idle, total, max, acquires, empty, waiting *prometheus.Desc
}

// NewPoolCollector makes a collector for pool.
func NewPoolCollector(pool *pgxpool.Pool) *PoolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("webhookd_db_pool_"+name, help, nil, nil)
	}
	return &PoolCollector{
		pool:     pool,
		acquired: d("acquired_conns", "Connections currently in use."),
		idle:     d("idle_conns", "Idle connections."),
		total:    d("total_conns", "Open connections."),
		max:      d("max_conns", "The pool's connection limit."),
		acquires: d("acquire_count_total", "Connections acquired from the pool."),
		empty:    d("empty_acquire_count_total", "Acquires that had to wait because the pool was empty."),
		waiting:  d("acquire_duration_seconds_total", "Total time spent waiting to acquire a connection."),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.total, c.max, c.acquires, c.empty, c.waiting} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(c.acquired, prometheus.GaugeValue, float64(s.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.IdleConns()))
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.TotalConns()))
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.acquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.empty, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.CounterValue, s.AcquireDuration().Seconds())
}
