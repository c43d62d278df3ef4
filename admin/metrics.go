package admin

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpMetrics are the API's request metrics (names fixed by DESIGN.md).
// The route label is chi's route pattern, never the raw path, so that ids in
// paths cannot blow up the label set.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
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
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		elapsed := time.Since(start)
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(sw.status)).Inc()
		s.metrics.duration.WithLabelValues(route).Observe(elapsed.Seconds())
		s.logger.InfoContext(r.Context(), "request", "correlation_id", w.Header().Get("Correlation-Id"),
			"method", r.Method, "route", route, "status", sw.status, "duration_ms", elapsed.Milliseconds())
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController and the WebSocket upgrade of
// GET /v1/listen reach the connection underneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) metricsHandler() http.Handler {
	if s.cfg.Gatherer == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{})
}
