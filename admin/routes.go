package admin

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/webhookd/webhookd/internal/sessions"
)

// Public is the handler of the public listener: /v1 and the legacy routes.
// It is the public route table: every route, the capability or scope it
// needs and the group that serves it, in one place.
func (s *Server) Public() http.Handler {
	h := s.respond.handle
	r := chi.NewRouter()
	r.Use(correlate, s.metrics.instrument)
	r.NotFound(s.respond.fail(errNotFound))
	r.MethodNotAllowed(s.respond.fail(errMethodNotAllowed))

	r.Route("/v1", func(r chi.Router) {
		// The version comes first so that every /v1 answer, errors
		// included, carries api-version (spec 9.3).
		r.Use(s.tracing.traced, s.rules.requestedVersion, s.rules.requireHTTPS, s.rules.limitBody)
		r.NotFound(s.respond.fail(errNotFound))
		r.MethodNotAllowed(s.respond.fail(errMethodNotAllowed))
		r.Get("/api_versions", s.documents.listVersions)
		r.Get("/openapi.json", openAPI)
		r.Get("/asyncapi.json", s.documents.asyncAPI)
		r.Get("/webhook_source_addresses", s.documents.listSourceAddresses)
		r.Group(func(r chi.Router) {
			// The rate limit comes before the idempotency claim, so that a
			// refused request writes nothing and leaves its key unused.
			r.Use(s.auth.authenticate(bearerKey), s.limits.limit(s.limits.api), s.idem.idempotent(true))
			view, manage := guards{s.auth.requireCapability(sessions.View)}, guards{s.auth.requireCapability(sessions.ManageEndpoints)}
			resend, viewSecret := guards{s.auth.requireCapability(sessions.Resend)}, guards{s.auth.requireCapability(sessions.ViewSecret)}
			write := guards{s.auth.requireScope(ScopeWrite)}
			// Each send_test_event, check and trigger sends requests to a
			// URL the merchant chose: rate-limited per merchant, one budget
			// for the three, on top of the API's per-key limit.
			manageAndSend := guards{manage[0], s.limits.limit(s.limits.testEvent)}

			subs, ends, events, ds, ps := s.subscriptions, s.endpoints, s.events, s.deliveries, s.portalSessions
			mount(r, h, []route{
				{http.MethodPost, "/webhook_subscriptions", manage, subs.create},
				{http.MethodGet, "/webhook_subscriptions", view, subs.list},
				{http.MethodGet, "/webhook_subscriptions/{id}", view, subs.get},
				{http.MethodPost, "/webhook_subscriptions/{id}", manage, subs.update},
				{http.MethodDelete, "/webhook_subscriptions/{id}", manage, subs.delete},
				{http.MethodPost, "/webhook_subscriptions/{id}/rotate_secret", manage, subs.rotateSecret},

				{http.MethodGet, "/webhook_subscriptions/{id}/secret", viewSecret, ends.revealSecret},
				{http.MethodGet, "/webhook_subscriptions/{id}/health", view, ends.health},
				{http.MethodGet, "/webhook_subscriptions/{id}/stats", view, ends.stats},
				{http.MethodPost, "/webhook_subscriptions/{id}/check", manageAndSend, ends.check},
				// Runs the merchant's code, sends nothing.
				{http.MethodPost, "/webhook_subscriptions/{id}/transformation/simulate", manage, s.transforms.simulate},
				// An API key with webhooks:read, never a portal session:
				// reading moves the line on (docs/poll.md).
				{http.MethodGet, "/webhook_subscriptions/{id}/poll", guards{s.auth.requireScope(ScopeRead)}, s.polls.poll},

				{http.MethodGet, "/events", view, events.list},
				{http.MethodGet, "/events/{id}", view, events.get},
				{http.MethodPost, "/events/{id}/cancel", manage, s.scheduled.cancelForMerchant},
				{http.MethodGet, "/event_types", view, events.listTypes},
				{http.MethodGet, "/event_types/{type}", view, events.getType},
				{http.MethodPost, "/event_types/{type}/trigger", manageAndSend, events.trigger},

				{http.MethodGet, "/webhook_deliveries", view, ds.list},
				{http.MethodGet, "/webhook_deliveries/{id}", view, ds.get},
				{http.MethodPost, "/webhook_deliveries/{id}/redeliver", resend, ds.redeliver},
				{http.MethodPost, "/webhook_subscriptions/{id}/recover", resend, ds.recoverFailed},
				{http.MethodPost, "/webhook_deliveries/replay", resend, s.replays.replay},
				{http.MethodGet, "/replays/{id}", view, s.replays.get},
				{http.MethodPost, "/webhook_subscriptions/{id}/send_test_event", manageAndSend, ds.sendTestEvent},

				// Minting needs an API key with webhooks:write: a session
				// cannot mint sessions.
				{http.MethodPost, "/portal_sessions", write, ps.createForKey},
				{http.MethodGet, "/portal_sessions/current", view, ps.current},
				{http.MethodDelete, "/portal_sessions/current", view, ps.end},

				// An API key with webhooks:write, never a portal session:
				// the listener's signing secret is derived from the key.
				{http.MethodGet, "/listen", write, s.listen.listen},
			})
		})
	})
	r.Route("/api/service/webhook-subscription", func(r chi.Router) {
		r.Use(s.tracing.traced, markLegacy, s.rules.requireHTTPS, s.rules.limitBody)
		r.NotFound(s.respond.fail(errNotFound))
		r.MethodNotAllowed(s.respond.fail(errMethodNotAllowed))
		r.Use(s.auth.authenticate(serviceKey), s.limits.limit(s.limits.api), s.idem.idempotent(false))
		write := guards{s.auth.requireScope(ScopeWrite)}
		mount(r, h, []route{
			{http.MethodPost, "/create", write, s.legacy.create},
			{http.MethodPost, "/update", write, s.legacy.update},
			{http.MethodPost, "/delete", write, s.legacy.delete},
		})
	})
	if s.portal != nil {
		portalRoutes(r, s.portal)
	}
	return r
}

// Internal is the handler of the internal listener: the probes, the
// metrics and the core API's routes, which take the ingest token.
func (s *Server) Internal() http.Handler {
	h := s.respond.handle
	r := chi.NewRouter()
	r.Use(correlate, s.metrics.instrument, s.rules.limitBody)
	r.NotFound(s.respond.fail(errNotFound))
	r.MethodNotAllowed(s.respond.fail(errMethodNotAllowed))
	r.Get("/healthz", healthz)
	r.Get("/readyz", s.internal.readyz)
	r.Handle("/metrics", metricsHandler(s.gatherer))
	// The document needs no token, like the public one (openapi.go); the
	// static route wins over the /internal/v1 mount below.
	r.Get("/internal/v1/openapi.json", openAPIInternal)
	// Profiles for the benchmark and for incidents; the same token as the
	// internal API, since a profile shows the process's inner workings.
	r.With(s.rules.requireIngestToken).Mount("/debug", middleware.Profiler())
	r.Route("/internal/v1", func(r chi.Router) {
		r.Use(s.tracing.traced, s.rules.requireIngestToken)

		keys, ps := s.apiKeys, s.portalSessions
		mount(r, h, []route{
			{http.MethodPut, "/merchants/{id}", nil, s.internal.putMerchant},

			{http.MethodPost, "/merchants/{id}/api_keys", nil, keys.create},
			{http.MethodGet, "/merchants/{id}/api_keys", nil, keys.list},
			{http.MethodDelete, "/merchants/{id}/api_keys/{key_id}", nil, keys.revoke},
			{http.MethodPost, "/merchants/{id}/api_keys/{key_id}/roll", nil, keys.roll},

			{http.MethodPost, "/merchants/{id}/portal_sessions", nil, ps.createForMerchant},
			{http.MethodDelete, "/merchants/{id}/portal_sessions", nil, ps.endForMerchant},

			{http.MethodPost, "/events", nil, s.ingest.publish},
			{http.MethodPost, "/events/batch", nil, s.ingest.publishBatch},

			{http.MethodPost, "/events/{id}/erase", nil, s.erasure.erase},
			{http.MethodGet, "/audit", nil, s.erasure.listAudit},
			{http.MethodPost, "/events/{id}/cancel", nil, s.scheduled.cancelAny},
		})
	})
	return r
}

// guards are the middleware a route needs beyond its group's: the
// capability or scope it takes, a rate limit of its own.
type guards []func(http.Handler) http.Handler

// route is one line of a route table: a method and pattern, its guards,
// and the group's handler that serves it.
type route struct {
	method, pattern string
	guards          guards
	serve           handlerFunc
}

// mount registers every route of table on r, each handler adapted by
// handle (which renders its errors).
func mount(r chi.Router, handle func(handlerFunc) http.HandlerFunc, table []route) {
	for _, rt := range table {
		r.With(rt.guards...).Method(rt.method, rt.pattern, handle(rt.serve))
	}
}
