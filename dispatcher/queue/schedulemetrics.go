package queue

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/webhookd/webhookd/internal/clock"
)

// scheduleCollector reports the schedule's state at each scrape, read from
// Redis, one call per shard. Every process reads the same schedule, so every
// instance reports the same numbers (dashboards take the max), as asynq's
// queue metrics do.
type scheduleCollector struct {
	lanes  *Lanes
	clock  clock.Clock
	parked *prometheus.Desc
	due    *prometheus.Desc
	later  *prometheus.Desc
	oldest *prometheus.Desc
	up     *prometheus.Desc
}

// NewScheduleCollector returns the collector of the webhookd_schedule_*
// gauges, read from l when scraped.
func NewScheduleCollector(l *Lanes, clock clock.Clock) *scheduleCollector {
	return &scheduleCollector{lanes: l, clock: clock,
		parked: prometheus.NewDesc("webhookd_schedule_parked", "Delivery attempts waiting in the schedule, due or not (retries included).", nil, nil),
		due:    prometheus.NewDesc("webhookd_schedule_merchants_due", "Merchants with attempts due now, waiting for a worker slot.", nil, nil),
		later:  prometheus.NewDesc("webhookd_schedule_merchants_later", "Merchants whose attempts are all parked for later (retries, rate limits).", nil, nil),
		oldest: prometheus.NewDesc("webhookd_schedule_oldest_due_seconds", "How long the oldest due attempt has waited for a worker slot (sampled over the merchants next in turn).", nil, nil),
		up:     prometheus.NewDesc("webhookd_schedule_up", "1 if the schedule could be read from Redis at this scrape.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *scheduleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.parked, c.due, c.later, c.oldest, c.up} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *scheduleCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := c.lanes.Stats(ctx, c.clock.Now())
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(s.Parked))
	ch <- prometheus.MustNewConstMetric(c.due, prometheus.GaugeValue, float64(s.MerchantsDue))
	ch <- prometheus.MustNewConstMetric(c.later, prometheus.GaugeValue, float64(s.MerchantsLater))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.OldestDue.Seconds())
}
