package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// ExemplarLabel is the exemplar label that holds a trace id; the
// dashboards' trace links read it.
const ExemplarLabel = "trace_id"

// ObserveTraced records v in h, with sc's trace id as the observation's
// exemplar when sc is sampled (a trace the backend will hold): the
// latency histograms in /metrics lead from a slow bucket to one trace
// that fell in it. Unsampled or no span: a plain observation.
func ObserveTraced(h prometheus.Observer, v float64, sc trace.SpanContext) {
	if sc.IsSampled() {
		if eo, ok := h.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{ExemplarLabel: sc.TraceID().String()})
			return
		}
	}
	h.Observe(v)
}
