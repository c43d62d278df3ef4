// Package metrics holds the delivery pipeline's Prometheus series, one Set
// shared by every role of a process, so that each series is registered once
// whichever roles the process runs.
package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/internal/destination"
)

// Attempt outcomes, the values of the outcome label (DESIGN.md "Metrics").
const (
	OutcomeSuccess      = destination.OutcomeSuccess
	OutcomeHTTPError    = destination.OutcomeHTTPError
	OutcomeTimeout      = destination.OutcomeTimeout
	OutcomeNetworkError = destination.OutcomeNetworkError
	OutcomeBlocked      = destination.OutcomeBlocked
)

// Task results, the values of webhookd_tasks_total's result label.
const (
	ResultDone     = "done"
	ResultDeferred = "deferred"
	ResultRetried  = "retried"
	ResultRefused  = "refused"
	ResultRenewed  = "renewed"
)

// Set is the pipeline's Prometheus series. The names are fixed: the
// dashboards and alert rules in dashboards/ use them.
type Set struct {
	// The fields are the series of the same name (webhookd_ and the name
	// in snake case, see New), each counted where its role does the work.
	EventsIngested   *prometheus.CounterVec
	EventsRefused    *prometheus.CounterVec
	Tasks            *prometheus.CounterVec
	Deferred         *prometheus.CounterVec
	Attempts         *prometheus.CounterVec
	AttemptDuration  prometheus.Histogram
	DeliveryLatency  prometheus.Histogram
	DeliveriesFailed prometheus.Counter
	RetriesScheduled prometheus.Counter
	SweeperRequeued  prometheus.Counter
	PublishesWaiting prometheus.Gauge
	PublishGroups    prometheus.Histogram
	// FiltersJudgedOutside counts publishes whose filters took longer than
	// a group commit waits (filterBudget), written with a later group.
	FiltersJudgedOutside prometheus.Counter
	// StartedLocally counts first attempts that a process with both roles
	// started in its own pool, without the trip through the schedule.
	StartedLocally prometheus.Counter
	// StartedOnPublishLease counts first attempts the pool refused as they
	// were stored, then ran on their publish's lease when the same
	// process took them back from the schedule (deliver's keptLeases).
	StartedOnPublishLease prometheus.Counter
}

// New makes the series and registers them on reg (nil: nowhere).
// refusalRules are the rules a published event can break, whose refusal
// series start at zero.
func New(reg prometheus.Registerer, refusalRules []string) (*Set, error) {
	m := &Set{
		EventsIngested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_events_ingested_total",
			Help: "Events stored, by type (a re-published event id counts once).",
		}, []string{"type"}),
		EventsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_events_refused_total",
			Help: "Producer events the worker refused (never stored nor delivered), by the rule they broke.",
		}, []string{"rule"}),
		Tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_tasks_total",
			Help: "asynq tasks handled, by task type and result: done, deferred (not due or throttled), retried, refused, renewed (enqueued afresh after its last retry).",
		}, []string{"task", "result"}),
		Deferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_attempts_deferred_total",
			Help: "Attempts taken from the schedule and put back without an attempt, by reason: busy (a manual attempt while another of its delivery runs), early (an older build's task before its time). Waiting for a share, a cap or a rate limit's turn is no deferral: such attempts stay parked.",
		}, []string{"reason"}),
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_delivery_attempts_total",
			Help: "Delivery attempts, by outcome: success, http_error, timeout, network_error, blocked.",
		}, []string{"outcome"}),
		AttemptDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "webhookd_delivery_attempt_duration_seconds",
			Help: "Duration of one delivery attempt's HTTP exchange.",
			// 1 ms to 25 s: from a receiver on the same network to the
			// delivery timeout.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 25},
		}),
		DeliveryLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "webhookd_delivery_latency_seconds",
			Help: "Time from an event's creation to its delivery's first 2xx answer.",
			// Up to about a day: retried deliveries succeed hours later.
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 4 * 3600, 24 * 3600},
		}),
		DeliveriesFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_deliveries_failed_total",
			Help: "Deliveries that failed permanently (every attempt used up).",
		}),
		RetriesScheduled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_retries_scheduled_total",
			Help: "Retries scheduled after a failed attempt.",
		}),
		SweeperRequeued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_sweeper_requeued_total",
			Help: "Overdue deliveries the sweeper found without a live task and enqueued again.",
		}),
		PublishesWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhookd_publishes_waiting",
			Help: "Publishes waiting for the commit of their group: queued, or being written.",
		}),
		FiltersJudgedOutside: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_publish_filters_deferred_total",
			Help: "Publishes whose subscription filters took longer than a group commit waits; they were judged outside it and written with a later group.",
		}),
		StartedLocally: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_attempts_started_locally_total",
			Help: "First attempts the publishing process started in its own worker pool, without the trip through the schedule in Redis.",
		}),
		StartedOnPublishLease: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_attempts_on_publish_lease_total",
			Help: "First attempts that went through the schedule and ran on the lease their publish took, without a lease statement: taken back by the process that stored them within the window.",
		}),
		PublishGroups: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "webhookd_publish_group_size",
			Help: "Publishes written together in one transaction (group commit).",
			// 1 to groupcommit.MaxBatch.
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 500},
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.EventsIngested, m.EventsRefused, m.Tasks, m.Deferred, m.Attempts, m.AttemptDuration,
		m.DeliveryLatency, m.DeliveriesFailed, m.RetriesScheduled, m.SweeperRequeued, m.PublishesWaiting, m.PublishGroups,
		m.FiltersJudgedOutside, m.StartedLocally, m.StartedOnPublishLease} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register dispatcher metrics: %w", err)
		}
	}
	// Pre-create the outcome series so that dashboards and rate() see zeros
	// rather than missing series.
	for _, o := range []string{OutcomeSuccess, OutcomeHTTPError, OutcomeTimeout, OutcomeNetworkError, OutcomeBlocked} {
		m.Attempts.WithLabelValues(o)
	}
	for _, r := range refusalRules {
		m.EventsRefused.WithLabelValues(r)
	}
	return m, nil
}
