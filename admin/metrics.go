package admin

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/webhookd/webhookd/internal/clock"
)

// httpMetrics are the API's request metrics (names fixed by DESIGN.md),
// and the middleware that counts, times and logs every request on both
// listeners. The route label is chi's route pattern, never the raw path, so
// that ids in paths cannot blow up the label set.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// clock times each request: the engine's one clock, so that time.Now
	// has one reader.
	clock  clock.Clock
	logger *slog.Logger
}

// newHTTPMetrics registers the request metrics with reg (nil registers
// nothing).
func newHTTPMetrics(reg prometheus.Registerer, clk clock.Clock, logger *slog.Logger) (*httpMetrics, error) {
	m := &httpMetrics{clock: clk, logger: logger,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_http_requests_total",
			Help: "API requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "webhookd_http_request_duration_seconds",
			Help:    "API request duration, by route pattern.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 25},
		}, []string{"route"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register http metrics: %w", err)
		}
	}
	return m, nil
}

// instrument counts and times every request, and logs it.
func (m *httpMetrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := m.clock.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		elapsed := m.clock.Now().Sub(start)
		m.requests.WithLabelValues(route, strconv.Itoa(sw.status)).Inc()
		m.duration.WithLabelValues(route).Observe(elapsed.Seconds())
		m.logger.InfoContext(r.Context(), "request", "correlation_id", w.Header().Get("Correlation-Id"),
			"method", r.Method, "route", route, "status", sw.status, "duration_ms", elapsed.Milliseconds())
	})
}

// statusWriter notes the status a handler answers.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader notes the status.
func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController and the WebSocket upgrade of
// GET /v1/listen reach the connection underneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// metricsHandler serves GET /metrics from g; without one, 404.
func metricsHandler(g prometheus.Gatherer) http.Handler {
	if g == nil {
		return http.NotFoundHandler()
	}
	// OpenMetrics, when the scraper asks for it, is the format that
	// carries the latency histograms' exemplars (trace ids).
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true})
}
