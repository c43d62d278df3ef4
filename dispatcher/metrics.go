package dispatcher

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Attempt outcomes, the values of the outcome label (DESIGN.md "Metrics").
const (
	outcomeSuccess      = "success"
	outcomeHTTPError    = "http_error"
	outcomeTimeout      = "timeout"
	outcomeNetworkError = "network_error"
	outcomeBlocked      = "blocked"
)

// metrics are the pipeline's Prometheus series. The names are fixed: the
// dashboards and alert rules in dashboards/ use them.
type metrics struct {
	eventsIngested   *prometheus.CounterVec
	eventsRefused    *prometheus.CounterVec
	tasks            *prometheus.CounterVec
	deferred         *prometheus.CounterVec
	attempts         *prometheus.CounterVec
	attemptDuration  prometheus.Histogram
	deliveryLatency  prometheus.Histogram
	deliveriesFailed prometheus.Counter
	retriesScheduled prometheus.Counter
	sweeperRequeued  prometheus.Counter
	publishesWaiting prometheus.Gauge
	publishGroups    prometheus.Histogram
	// filtersJudgedOutside counts publishes whose filters took longer than
	// a group commit waits (filterBudget), written with a later group.
	filtersJudgedOutside prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		eventsIngested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_events_ingested_total",
			Help: "Events stored, by type (a re-published event id counts once).",
		}, []string{"type"}),
		eventsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_events_refused_total",
			Help: "Producer events the worker refused (never stored nor delivered), by the rule they broke.",
		}, []string{"rule"}),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_tasks_total",
			Help: "asynq tasks handled, by task type and result: done, deferred (not due or throttled), retried, refused, renewed (enqueued afresh after its last retry).",
		}, []string{"task", "result"}),
		deferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_attempts_deferred_total",
			Help: "Attempts taken from the schedule and put back without an attempt, by reason: busy (a manual attempt while another of its delivery runs), early (an older build's task before its time). Waiting for a share, a cap or a rate limit's turn is no deferral: such attempts stay parked.",
		}, []string{"reason"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_delivery_attempts_total",
			Help: "Delivery attempts, by outcome: success, http_error, timeout, network_error, blocked.",
		}, []string{"outcome"}),
		attemptDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "webhookd_delivery_attempt_duration_seconds",
			Help: "Duration of one delivery attempt's HTTP exchange.",
			// 1 ms to 25 s: from a receiver on the same network to the
			// delivery timeout.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 25},
		}),
		deliveryLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "webhookd_delivery_latency_seconds",
			Help: "Time from an event's creation to its delivery's first 2xx answer.",
			// Up to about a day: retried deliveries succeed hours later.
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 4 * 3600, 24 * 3600},
		}),
		deliveriesFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_deliveries_failed_total",
			Help: "Deliveries that failed permanently (every attempt used up).",
		}),
		retriesScheduled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_retries_scheduled_total",
			Help: "Retries scheduled after a failed attempt.",
		}),
		sweeperRequeued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_sweeper_requeued_total",
			Help: "Overdue deliveries the sweeper found without a live task and enqueued again.",
		}),
		publishesWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhookd_publishes_waiting",
			Help: "Publishes waiting for the commit of their group: queued, or being written.",
		}),
		filtersJudgedOutside: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_publish_filters_deferred_total",
			Help: "Publishes whose subscription filters took longer than a group commit waits; they were judged outside it and written with a later group.",
		}),
		publishGroups: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "webhookd_publish_group_size",
			Help: "Publishes written together in one transaction (group commit).",
			// 1 to maxBatch.
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 500},
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.eventsIngested, m.eventsRefused, m.tasks, m.deferred, m.attempts, m.attemptDuration,
		m.deliveryLatency, m.deliveriesFailed, m.retriesScheduled, m.sweeperRequeued, m.publishesWaiting, m.publishGroups,
		m.filtersJudgedOutside} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register dispatcher metrics: %w", err)
		}
	}
	// Pre-create the outcome series so that dashboards and rate() see zeros
	// rather than missing series.
	for _, o := range []string{outcomeSuccess, outcomeHTTPError, outcomeTimeout, outcomeNetworkError, outcomeBlocked} {
		m.attempts.WithLabelValues(o)
	}
	for _, r := range RefusalRules() {
		m.eventsRefused.WithLabelValues(r)
	}
	return m, nil
}
