package admin

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
)

// errStarting refuses the internal API while the process waits for
// Postgres: Postgres is the upstream a stored event needs, and the
// producer retries with the same event id until an answer says stored.
var errStarting = errUpstream("webhookd is starting and cannot reach Postgres yet; retry after the Retry-After delay.")

// Starting is the internal listener's handler while the process waits for
// Postgres at startup (up to WEBHOOKD_STARTUP_TIMEOUT): alive on /healthz,
// not ready on /readyz, every other route refused with a retryable
// upstream_error. A probe meanwhile sees a process that is starting, not a
// closed port, which an orchestrator would take for a crash.
func Starting(logger *slog.Logger) http.Handler {
	respond := responder{logger: logger}
	r := chi.NewRouter()
	r.Use(correlate)
	r.NotFound(respond.fail(errStarting))
	r.MethodNotAllowed(respond.fail(errStarting))
	r.Get("/healthz", healthz)
	r.Get("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"postgres": "unavailable", "redis": "unchecked"})
	})
	return r
}
