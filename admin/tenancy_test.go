package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/signer"
)

// Tenant isolation and key environments, checked on every route the
// routers serve: the tests walk the routers and fail on a route that the
// tables below do not know, so a new route cannot skip these checks.

// tenant is one merchant's resources, made the way production makes them.
type tenant struct {
	merchant, key string
	// sub has the deliveries; spare is a second subscription, made on the
	// legacy surface, which the legacy routes act on; poll is a poll
	// subscription (made after the events, so its line is empty).
	sub, spare, poll subscription
	events           []event
	deliveries       []delivery // settled, each with its attempts
	// replay is a replay of the merchant's, complete (it matched none).
	replay string
	// scheduled is an event published with deliver_at an hour ahead,
	// which the cancel route acts on.
	scheduled string
}

// ids are every resource id of the tenant.
func (tn tenant) ids() []string {
	out := []string{tn.sub.ID, tn.spare.ID, tn.poll.ID, tn.replay, tn.scheduled}
	for _, e := range tn.events {
		out = append(out, e.ID)
	}
	for _, d := range tn.deliveries {
		out = append(out, d.ID)
	}
	return out
}

// newTenants starts the API with a running pipeline and makes merchants
// m_a and m_b. Each has a subscription, two events published through the
// internal route, and their deliveries with the attempts the workers
// recorded: m_a's receiver answers 500, so its deliveries end failed after
// three attempts (recover would replay them); m_b's answers 200.
func newTenants(t *testing.T) (h *harness, a, b tenant) {
	t.Helper()
	h, _ = newPipelineHarness(t)
	a = h.tenant("m_a", http.StatusInternalServerError, "failed")
	b = h.tenant("m_b", http.StatusOK, "succeeded")
	return h, a, b
}

// tenant makes one merchant's key, subscriptions, events and settled
// deliveries; its receiver answers answer, and its deliveries end settles.
func (h *harness) tenant(merchant string, answer int, settles string) tenant {
	h.t.Helper()
	tn := tenant{merchant: merchant, key: h.merchant(merchant)}
	rcv := newHookReceiver(h.t, answer)
	tn.sub = h.createSubscription(tn.key, hookBody(rcv.URL+"/"+merchant))
	spare := h.legacy("create", tn.key, "", hookBody(rcv.URL+"/"+merchant+"/spare"))
	if spare.Status != http.StatusOK {
		h.t.Fatalf("legacy create: %d %s", spare.Status, spare.Body)
	}
	tn.spare = decode[subscription](h.t, spare)
	for i := range 2 {
		ev := h.publish(merchant, "payout.paid", fmt.Sprintf(`{"id":"po_%s_%d"}`, merchant, i))
		tn.events = append(tn.events, ev)
		for _, d := range h.deliveriesOf(tn.key, ev.ID) {
			d = h.waitDelivery(tn.key, d.ID, settles, settled)
			if d.Status != settles || len(d.Attempts) == 0 {
				h.t.Fatalf("%s's delivery %s is %s with %d attempts, want %s", merchant, d.ID, d.Status, len(d.Attempts), settles)
			}
			tn.deliveries = append(tn.deliveries, d)
		}
	}
	r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: map[string]any{"merchant_id": merchant,
		"type": "payout.paid", "payload": map[string]any{}, "deliver_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}})
	if r.Status != http.StatusAccepted {
		h.t.Fatalf("publish a scheduled event: %d %s", r.Status, r.Body)
	}
	tn.scheduled, _ = r.JSON(h.t)["id"].(string)
	tn.poll = h.createSubscription(tn.key, map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "poll"}})
	now := time.Now().UTC()
	rp, err := h.store.Replays.CreateReplay(context.Background(), merchant, store.ReplayFilter{Since: now.Add(-time.Hour), Until: now}, 0, now)
	if err != nil {
		h.t.Fatal(err)
	}
	tn.replay = rp.ID.String()
	return tn
}

// twin is a second admin.Server on the harness's database, built from the
// harness's Config changed by configure. Its Publisher is a dispatcher
// that no worker runs, on a Redis of its own: whatever a request asks of
// the pipeline (a redelivery, a test event, a recovery) stays queued there,
// where queued counts it.
type twin struct {
	*harness
	server    *admin.Server
	inspector *asynq.Inspector
	// pipeline gathers the twin's dispatcher metrics, the schedule's
	// gauges among them.
	pipeline prometheus.Gatherer
}

func (h *harness) twin(configure ...func(*admin.Config)) twin {
	h.t.Helper()
	t := h.t
	cfg := h.cfg
	reg := prometheus.NewRegistry()
	cfg.Registerer, cfg.Gatherer = reg, reg
	rd := storetest.NewRedis(t)
	queue := asynq.RedisClientOpt{Network: "unix", Addr: rd.Socket}
	sealer, err := signer.NewSealer(cfg.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	pipeline := prometheus.NewRegistry()
	d, err := dispatcher.New(dispatcher.Config{Store: cfg.Store, Redis: queue, Sealer: sealer,
		Schedule: retry.Schedule{Delays: []time.Duration{time.Second}}, DefaultAPIVersion: admin.DefaultVersion,
		EventTypes: cfg.EventTypes, MaxPayloadBytes: 256 << 10, VersionUsable: cfg.Versions.Usable, Registerer: pipeline,
		MasterKey: cfg.MasterKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	usePipeline(&cfg, d)
	for _, c := range configure {
		c(&cfg)
	}
	srv, err := admin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tw := *h
	tw.cfg = cfg
	tw.public, tw.internal = httptest.NewServer(srv.Public()), httptest.NewServer(srv.Internal())
	t.Cleanup(tw.public.Close)
	t.Cleanup(tw.internal.Close)
	inspector := asynq.NewInspector(queue)
	t.Cleanup(func() { inspector.Close() })
	return twin{harness: &tw, server: srv, inspector: inspector, pipeline: pipeline}
}

// queued counts the tasks in the twin's Redis, in every state.
func (tw twin) queued() int {
	tw.t.Helper()
	queues, err := tw.inspector.Queues()
	if err != nil {
		tw.t.Fatal(err)
	}
	n := 0
	for _, q := range queues {
		info, err := tw.inspector.GetQueueInfo(q)
		if err != nil {
			tw.t.Fatal(err)
		}
		n += info.Size + info.Completed
	}
	// Attempts wait in the dispatcher's schedule, not in a queue.
	families, err := tw.pipeline.Gather()
	if err != nil {
		tw.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "webhookd_schedule_parked" {
			n += int(f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	return n
}

// routesOf lists every route a chi router serves as "METHOD /pattern".
func routesOf(t *testing.T, handler http.Handler) []string {
	t.Helper()
	routes, ok := handler.(chi.Routes)
	if !ok {
		t.Fatalf("%T is not a chi router: its routes cannot be walked", handler)
	}
	var out []string
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out = append(out, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// tableCovers fails the test for every walked route the table lacks, and
// for every table entry that is no route any more.
func tableCovers[V any](t *testing.T, table map[string]V, walked []string, what string) {
	t.Helper()
	for _, r := range walked {
		if _, ok := table[r]; !ok {
			t.Errorf("route %s is not in %s: add it, saying how the route must answer", r, what)
		}
	}
	for r := range table {
		if !slices.Contains(walked, r) {
			t.Errorf("%s lists %s, which the router does not serve", what, r)
		}
	}
}

// A stranger's call on a route is answered by one of these rules.
type tenancyRule int

const (
	// exempt: the route needs no key and shows no merchant's data.
	exempt tenancyRule = iota
	// refused: 404 resource_not_found, as for an id that does not exist.
	refused
	// listed: 200 with a list of the caller's own resources alone.
	listed
	// created: the caller makes a resource of its own.
	created
	// own: the call is about the caller alone (its portal session, the
	// event catalogue): it succeeds and shows none of the owner's ids.
	own
	// ownElsewhere: the route names no resource, and acts on the caller's
	// own merchant alone (a listener, a triggered event); its answers are
	// checked in its own tests (listen_test.go, trigger_test.go), since
	// they are no plain 2xx here (a WebSocket, a sandbox-only route).
	ownElsewhere
)

// call is one request on a route, naming the owner's resources.
type call struct {
	method, path string
	body         any
	legacy       bool
	// empty: a stranger's list must be empty (its filters name the
	// owner's resources, or match only the owner's), while the owner's is
	// not (which shows the filter matches something).
	empty bool
}

// as is the call made with key, on the surface's header.
func (c call) as(key string) request {
	req := request{Method: c.method, Path: c.path, Body: c.body}
	if c.legacy {
		req.Header = map[string]string{"X-Service-Api-Key": key, "Idempotency-Key": omitHeader}
	} else {
		req.Key = key
	}
	return req
}

func (c call) String() string { return c.method + " " + c.path }

// routeCase is how the isolation tests call one public route.
type routeCase struct {
	rule tenancyRule
	// calls are the route's requests on the owner's resources.
	calls func(owner tenant) []call
}

// onSub is one call on the owner's subscription (suffix after its id).
func onSub(method, suffix string, body any) func(tenant) []call {
	return func(o tenant) []call {
		return []call{{method: method, path: "/v1/webhook_subscriptions/" + o.sub.ID + suffix, body: body}}
	}
}

// onEach is one call per resource of the owner that of lists.
func onEach[T any](method, prefix, suffix string, of func(tenant) []T, id func(T) string) func(tenant) []call {
	return func(o tenant) []call {
		var out []call
		for _, v := range of(o) {
			out = append(out, call{method: method, path: prefix + id(v) + suffix})
		}
		return out
	}
}

func eventsOf(o tenant) []event        { return o.events }
func deliveriesOf(o tenant) []delivery { return o.deliveries }
func eventID(e event) string           { return e.ID }
func deliveryID(d delivery) string     { return d.ID }

// legacyCall is a call of a legacy route, which names its resource in the body.
func legacyCall(op string, body any) call {
	return call{method: http.MethodPost, path: legacyPath + op, body: body, legacy: true}
}

// strangerURL is a valid target URL for a stranger's create or update.
func strangerURL(o tenant) string { return o.sub.URL + "/stranger" }

// sinceAnHourAgo is a recover body covering the tenant's deliveries.
func sinceAnHourAgo() map[string]any {
	return map[string]any{"since": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}
}

// ownCall is one call that names none of the owner's resources.
func ownCall(method, path string, body any) func(tenant) []call {
	return func(tenant) []call { return []call{{method: method, path: path, body: body}} }
}

func listCall(path string, empty bool) call {
	return call{method: http.MethodGet, path: path, empty: empty}
}

const legacyPath = "/api/service/webhook-subscription/"

// publicRoutes is every route of the public listener. Adding a route
// without an entry here fails TestTenantIsolation.
var publicRoutes = map[string]routeCase{
	"GET /v1/api_versions":             {rule: exempt},
	"GET /v1/openapi.json":             {rule: exempt},
	"GET /v1/asyncapi.json":            {rule: exempt},
	"GET /v1/webhook_source_addresses": {rule: exempt},

	"POST /v1/webhook_subscriptions": {rule: created, calls: func(o tenant) []call {
		return []call{{method: http.MethodPost, path: "/v1/webhook_subscriptions", body: hookBody(strangerURL(o))}}
	}},
	"GET /v1/webhook_subscriptions": {rule: listed, calls: func(o tenant) []call {
		return []call{listCall("/v1/webhook_subscriptions", false), listCall("/v1/webhook_subscriptions?status=enabled", false)}
	}},
	"GET /v1/webhook_subscriptions/{id}":    {rule: refused, calls: onSub(http.MethodGet, "", nil)},
	"DELETE /v1/webhook_subscriptions/{id}": {rule: refused, calls: onSub(http.MethodDelete, "", nil)},
	"POST /v1/webhook_subscriptions/{id}": {rule: refused, calls: func(o tenant) []call {
		return onSub(http.MethodPost, "", map[string]any{"url": strangerURL(o), "description": "changed by a stranger"})(o)
	}},
	"POST /v1/webhook_subscriptions/{id}/rotate_secret":   {rule: refused, calls: onSub(http.MethodPost, "/rotate_secret", nil)},
	"POST /v1/webhook_subscriptions/{id}/send_test_event": {rule: refused, calls: onSub(http.MethodPost, "/send_test_event", nil)},
	"POST /v1/webhook_subscriptions/{id}/recover": {rule: refused, calls: func(o tenant) []call {
		return onSub(http.MethodPost, "/recover", sinceAnHourAgo())(o)
	}},

	"GET /v1/events": {rule: listed, calls: func(o tenant) []call {
		return []call{listCall("/v1/events", false), listCall("/v1/events?event_type=payout.paid", false)}
	}},
	"GET /v1/events/{id}": {rule: refused, calls: onEach(http.MethodGet, "/v1/events/", "", eventsOf, eventID)},
	"POST /v1/events/{id}/cancel": {rule: refused, calls: func(o tenant) []call {
		return []call{{method: http.MethodPost, path: "/v1/events/" + o.scheduled + "/cancel"}}
	}},

	"GET /v1/webhook_deliveries": {rule: listed, calls: func(o tenant) []call {
		return []call{
			listCall("/v1/webhook_deliveries", false),
			listCall("/v1/webhook_deliveries?subscription_id="+o.sub.ID, true),
			listCall("/v1/webhook_deliveries?event_id="+o.events[0].ID, true),
			listCall("/v1/webhook_deliveries?status=failed", true),
			listCall("/v1/webhook_deliveries?status=failed&subscription_id="+o.sub.ID+"&event_id="+o.events[1].ID, true),
		}
	}},
	"GET /v1/webhook_deliveries/{id}": {rule: refused, calls: onEach(http.MethodGet, "/v1/webhook_deliveries/", "", deliveriesOf, deliveryID)},
	"POST /v1/webhook_deliveries/{id}/redeliver": {rule: refused,
		calls: onEach(http.MethodPost, "/v1/webhook_deliveries/", "/redeliver", deliveriesOf, deliveryID)},
	// A replay names no resource but a subscription (refused as a field:
	// admin/replays_test.go); a dry run counts the caller's alone. Another
	// merchant's replay is 404 below.
	"POST /v1/webhook_deliveries/replay": {rule: own, calls: func(tenant) []call {
		return []call{{method: http.MethodPost, path: "/v1/webhook_deliveries/replay", body: map[string]any{
			"since": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "until": time.Now().UTC().Format(time.RFC3339Nano),
			"dry_run": true}}}
	}},
	"GET /v1/replays/{id}": {rule: refused, calls: func(o tenant) []call {
		return []call{{method: http.MethodGet, path: "/v1/replays/" + o.replay}}
	}},

	"POST /v1/portal_sessions":                  {rule: own, calls: ownCall(http.MethodPost, "/v1/portal_sessions", map[string]any{"ttl_seconds": 60})},
	"GET /v1/portal_sessions/current":           {rule: own, calls: ownCall(http.MethodGet, "/v1/portal_sessions/current", nil)},
	"DELETE /v1/portal_sessions/current":        {rule: own, calls: ownCall(http.MethodDelete, "/v1/portal_sessions/current", nil)},
	"GET /v1/event_types":                       {rule: own, calls: ownCall(http.MethodGet, "/v1/event_types", nil)},
	"GET /v1/event_types/{type}":                {rule: own, calls: ownCall(http.MethodGet, "/v1/event_types/payout.paid", nil)},
	"GET /v1/webhook_subscriptions/{id}/secret": {rule: refused, calls: onSub(http.MethodGet, "/secret", nil)},
	"GET /v1/webhook_subscriptions/{id}/health": {rule: refused, calls: onSub(http.MethodGet, "/health", nil)},
	"GET /v1/webhook_subscriptions/{id}/stats":  {rule: refused, calls: onSub(http.MethodGet, "/stats", nil)},
	"GET /v1/webhook_subscriptions/{id}/poll": {rule: refused, calls: func(o tenant) []call {
		return []call{{method: http.MethodGet, path: "/v1/webhook_subscriptions/" + o.poll.ID + "/poll"}}
	}},
	"POST /v1/webhook_subscriptions/{id}/check": {rule: refused, calls: onSub(http.MethodPost, "/check", nil)},
	"POST /v1/webhook_subscriptions/{id}/transformation/simulate": {rule: refused, calls: onSub(http.MethodPost, "/transformation/simulate",
		map[string]any{"event_type": "payout.paid", "code": "function handler(webhook) { return webhook }"})},
	"GET /v1/listen": {rule: ownElsewhere, calls: func(tenant) []call {
		return []call{{method: http.MethodGet, path: "/v1/listen"}}
	}},
	"POST /v1/event_types/{type}/trigger": {rule: ownElsewhere, calls: func(tenant) []call {
		return []call{{method: http.MethodPost, path: "/v1/event_types/payout.paid/trigger"}}
	}},

	"POST " + legacyPath + "create": {rule: created, calls: func(o tenant) []call {
		return []call{legacyCall("create", hookBody(strangerURL(o)))}
	}},
	"POST " + legacyPath + "update": {rule: refused, calls: func(o tenant) []call {
		return []call{legacyCall("update", map[string]any{"id": o.spare.ID, "url": strangerURL(o), "description": "changed by a stranger"})}
	}},
	"POST " + legacyPath + "delete": {rule: refused, calls: func(o tenant) []call {
		return []call{legacyCall("delete", map[string]any{"id": o.spare.ID})}
	}},
}

// refusal checks an error answer on either surface: the spec 7 body on
// /v1, the legacy body (its docUrl names the code) on the legacy routes.
// It returns what is wrong, or "".
func refusal(r response, legacy bool, status int, code string) string {
	var body struct {
		Code   string `json:"code"`
		DocURL string `json:"docUrl"`
	}
	if r.Status != status || json.Unmarshal(r.Body, &body) != nil {
		return fmt.Sprintf("answered %d %q, want %d %s", r.Status, truncate(r.Body, 200), status, code)
	}
	got := body.Code
	if legacy {
		_, got, _ = strings.Cut(body.DocURL, "#")
	}
	if got != code {
		return fmt.Sprintf("answered %d %q, want code %s", r.Status, truncate(r.Body, 200), code)
	}
	return ""
}

// listIDs decodes a list answer's ids.
func listIDs(r response) ([]string, error) {
	var p page[struct {
		ID string `json:"id"`
	}]
	if err := json.Unmarshal(r.Body, &p); err != nil {
		return nil, err
	}
	var ids []string
	for _, v := range p.Data {
		ids = append(ids, v.ID)
	}
	return ids, nil
}

// walkPublic runs fn on every call of every public route that needs a key,
// in the order of the walk (coversPublic checks that the table knows them
// all).
// coversPublic fails the test for every route of the public listener that
// publicRoutes does not know.
func (tw twin) coversPublic() {
	tw.t.Helper()
	tableCovers(tw.t, publicRoutes, routesOf(tw.t, tw.server.Public()), "publicRoutes")
}

func (tw twin) walkPublic(owner tenant, fn func(route string, rc routeCase, c call)) {
	tw.t.Helper()
	for _, route := range routesOf(tw.t, tw.server.Public()) {
		rc, ok := publicRoutes[route]
		if !ok || rc.rule == exempt {
			continue
		}
		for _, c := range rc.calls(owner) {
			fn(route, rc, c)
		}
	}
}

// TestTenantIsolation: merchant B's key, on every route, against merchant
// A's subscription, events and deliveries, reads nothing of A's and changes
// nothing: every lookup is 404 resource_not_found, every list holds B's
// resources alone, whatever the filters, and afterwards A's rows are as
// they were and the pipeline was asked for nothing. A's own key on the
// same calls succeeds, so each refusal is about the tenant.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	h, a, b := newTenants(t)
	tw := h.twin()
	tw.coversPublic()
	before := databaseRows(t, h.store.Pool())

	tw.walkPublic(a, func(route string, rc routeCase, c call) {
		if rc.rule == created || rc.rule == own || rc.rule == ownElsewhere {
			return // B's own resource or state: checked below, once A's rows are compared
		}
		r := tw.do(c.as(b.key))
		if leaked := slices.DeleteFunc(a.ids(), func(id string) bool { return !bytes.Contains(r.Body, []byte(id)) }); len(leaked) > 0 {
			t.Errorf("%s by B shows A's %v: %s", c, leaked, truncate(r.Body, 300))
			return
		}
		switch rc.rule {
		case refused:
			if msg := refusal(r, c.legacy, http.StatusNotFound, "resource_not_found"); msg != "" {
				t.Errorf("%s by B on A's resource: %s", c, msg)
			}
		case listed:
			ids, err := listIDs(r)
			switch {
			case r.Status != http.StatusOK || err != nil:
				t.Errorf("%s by B: %d %s", c, r.Status, r.Body)
			case c.empty && len(ids) != 0:
				t.Errorf("%s by B lists %v, want nothing", c, ids)
			case !c.empty && len(ids) == 0:
				t.Errorf("%s by B lists nothing, want B's own resources", c)
			}
		}
	})

	if after := databaseRows(t, h.store.Pool()); !rowsEqual(t, before, after) {
		t.Error("B's calls on A's resources changed the database")
	}
	if n := tw.queued(); n != 0 {
		t.Errorf("B's calls on A's resources queued %d tasks", n)
	}
	for _, d := range a.deliveries {
		got := decode[delivery](t, tw.do(request{Method: http.MethodGet, Path: "/v1/webhook_deliveries/" + d.ID, Key: a.key}))
		if len(got.Attempts) != len(d.Attempts) || got.Status != d.Status {
			t.Errorf("A's delivery %s is %s with %d attempts after B's calls, was %s with %d",
				d.ID, got.Status, len(got.Attempts), d.Status, len(d.Attempts))
		}
	}

	// What B creates is B's: A neither reads it nor lists it.
	tw.walkPublic(a, func(route string, rc routeCase, c call) {
		if rc.rule == own {
			r := tw.do(c.as(b.key))
			leaked := slices.DeleteFunc(a.ids(), func(id string) bool { return !bytes.Contains(r.Body, []byte(id)) })
			if r.Status/100 != 2 || len(leaked) > 0 || bytes.Contains(r.Body, []byte(`"`+a.merchant+`"`)) {
				t.Errorf("%s by B: %d %s, shows A's %v", c, r.Status, truncate(r.Body, 300), leaked)
			}
			return
		}
		if rc.rule != created {
			return
		}
		r := tw.do(c.as(b.key))
		var made struct{ ID string }
		if r.Status/100 != 2 || json.Unmarshal(r.Body, &made) != nil || made.ID == "" {
			t.Errorf("%s by B: %d %s", c, r.Status, r.Body)
			return
		}
		got := tw.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + made.ID, Key: a.key})
		if msg := refusal(got, false, http.StatusNotFound, "resource_not_found"); msg != "" {
			t.Errorf("A reads the subscription B made with %s: %s", c, msg)
		}
		if ids := listAll[subscription](tw.harness, a.key, "/v1/webhook_subscriptions", 100); slices.ContainsFunc(ids,
			func(s subscription) bool { return s.ID == made.ID }) {
			t.Errorf("A lists the subscription B made with %s", c)
		}
	})

	// The same calls with A's key succeed (deletes last, since they end
	// the subscriptions the other calls need): the refusals above were
	// about the tenant, not a malformed call. A's redeliveries reach the
	// twin's queue, which shows that queued sees what a call enqueues.
	var deletes []call
	tw.walkPublic(a, func(route string, rc routeCase, c call) {
		if rc.rule == ownElsewhere {
			return
		}
		if c.method == http.MethodDelete || strings.HasSuffix(c.path, "/delete") {
			deletes = append(deletes, c)
			return
		}
		tw.expectOwnerCall(c, a.key)
	})
	// Counted before the deletes, which drop the subscriptions' waiting
	// work from the schedule.
	if tw.queued() == 0 {
		t.Error("A's redeliveries queued nothing: the check that B's queued nothing proves nothing")
	}
	for _, c := range deletes {
		tw.expectOwnerCall(c, a.key)
	}
}

// expectOwnerCall checks that the owner's own call succeeds, and that a
// list the stranger had to see empty is not empty for the owner.
func (tw twin) expectOwnerCall(c call, key string) {
	tw.t.Helper()
	r := tw.do(c.as(key))
	if r.Status/100 != 2 {
		tw.t.Errorf("%s by its owner: %d %s", c, r.Status, r.Body)
		return
	}
	if c.empty {
		if ids, err := listIDs(r); err != nil || len(ids) == 0 {
			tw.t.Errorf("%s by its owner lists nothing: the filter proves nothing", c)
		}
	}
}

// TestKeysOfTheOtherEnvironment: on a sandbox server a key issued for
// production is 401 on every route that needs a key, even on its own
// merchant's resources, and on a production server a sandbox key is; the
// key of the server's environment passes on the same calls. The public
// routes (api_versions, openapi.json) answer without a key on both.
func TestKeysOfTheOtherEnvironment(t *testing.T) {
	t.Parallel()
	h, a, _ := newTenants(t)
	issue := func(env, prefix string) string {
		key, err := merchants.NewAPIKey(env)
		if err != nil {
			t.Fatal(err)
		}
		key = prefix + key[strings.IndexByte(key, '.')+1:]
		if _, err := h.store.APIKeys.CreateAPIKey(context.Background(), a.merchant, admin.DefaultVersion, env, key,
			[]string{admin.ScopeRead, admin.ScopeWrite}); err != nil {
			t.Fatal(err)
		}
		return key
	}
	prodKey := issue("production", "prod.")
	// A key that looks like the server's own but was issued for the other
	// environment: the stored environment decides, not only the prefix.
	lookalike := issue("production", "sandbox.")

	sandbox := h.twin()
	production := h.twin(func(c *admin.Config) { c.Environment = "production" })
	for _, tc := range []struct {
		name    string
		server  twin
		refused []string
		own     string
	}{
		// The sandbox key passing on the sandbox server is
		// TestTenantIsolation's control; checked here too, it would delete
		// the subscriptions the production server's calls need.
		{"sandbox server", sandbox, []string{prodKey, lookalike}, ""},
		{"production server", production, []string{a.key}, prodKey},
	} {
		tc.server.coversPublic()
		for _, route := range routesOf(t, tc.server.server.Public()) {
			if rc, ok := publicRoutes[route]; ok && rc.rule == exempt {
				method, path, _ := strings.Cut(route, " ")
				if r := tc.server.do(request{Method: method, Path: path}); r.Status != http.StatusOK {
					t.Errorf("%s: public %s without a key: %d %s", tc.name, route, r.Status, r.Body)
				}
			}
		}
		var deletes []call
		tc.server.walkPublic(a, func(route string, rc routeCase, c call) {
			for _, key := range tc.refused {
				if msg := refusal(tc.server.do(c.as(key)), c.legacy, http.StatusUnauthorized, "authentication_required"); msg != "" {
					t.Errorf("%s: %s with a key of the other environment: %s", tc.name, c, msg)
				}
			}
			switch {
			case tc.own == "" || rc.rule == ownElsewhere:
			case c.method == http.MethodDelete || strings.HasSuffix(c.path, "/delete"):
				deletes = append(deletes, c)
			default:
				tc.server.expectOwnerCall(c, tc.own)
			}
		})
		for _, c := range deletes {
			tc.server.expectOwnerCall(c, tc.own)
		}
	}
}

// internalRoute is how TestInternalTokenOnEveryRoute calls one route
// pattern of the internal listener, with every method it serves.
type internalRoute struct {
	// open routes are for probes and scrapers: no token.
	open bool
	// path is the pattern filled in.
	path string
	// control is the method of one call with the right token, body its
	// valid body, which must get past the guard; "" for the profiles that
	// run for seconds.
	control string
	body    any
}

func guarded(path, control string, body any) internalRoute {
	return internalRoute{path: path, control: control, body: body}
}

// internalRoutes is every route pattern of the internal listener. Adding a
// route without an entry here fails TestInternalTokenOnEveryRoute.
var internalRoutes = map[string]internalRoute{
	"/healthz": {open: true, path: "/healthz"},
	"/readyz":  {open: true, path: "/readyz"},
	"/metrics": {open: true, path: "/metrics"},
	// The internal document, open like the public one (openapi.go).
	"/internal/v1/openapi.json": {open: true, path: "/internal/v1/openapi.json"},

	"/debug/":                   guarded("/debug/", http.MethodGet, nil),
	"/debug/vars":               guarded("/debug/vars", http.MethodGet, nil),
	"/debug/pprof":              guarded("/debug/pprof", http.MethodGet, nil),
	"/debug/pprof/*":            guarded("/debug/pprof/allocs", http.MethodGet, nil),
	"/debug/pprof/allocs":       guarded("/debug/pprof/allocs", http.MethodGet, nil),
	"/debug/pprof/block":        guarded("/debug/pprof/block", http.MethodGet, nil),
	"/debug/pprof/cmdline":      guarded("/debug/pprof/cmdline", http.MethodGet, nil),
	"/debug/pprof/goroutine":    guarded("/debug/pprof/goroutine", http.MethodGet, nil),
	"/debug/pprof/heap":         guarded("/debug/pprof/heap", http.MethodGet, nil),
	"/debug/pprof/mutex":        guarded("/debug/pprof/mutex", http.MethodGet, nil),
	"/debug/pprof/profile":      guarded("/debug/pprof/profile", "", nil),
	"/debug/pprof/symbol":       guarded("/debug/pprof/symbol", http.MethodGet, nil),
	"/debug/pprof/threadcreate": guarded("/debug/pprof/threadcreate", http.MethodGet, nil),
	"/debug/pprof/trace":        guarded("/debug/pprof/trace", "", nil),

	// No control call: with the right token an unknown event is 404,
	// which the check would take for a route not served.
	"/internal/v1/events/{id}/erase": guarded("/internal/v1/events/0193a1b2-0000-7000-8000-000000000000/erase", "", nil),
	"/internal/v1/audit":             guarded("/internal/v1/audit?merchant_id=m_token", http.MethodGet, nil),
	"/internal/v1/merchants/{id}": guarded("/internal/v1/merchants/m_token", http.MethodPut,
		map[string]any{"notification_email": "ops@example.com"}),
	"/internal/v1/merchants/{id}/api_keys": guarded("/internal/v1/merchants/m_token/api_keys", http.MethodPost,
		map[string]any{"scopes": []string{admin.ScopeRead}}),
	"/internal/v1/merchants/{id}/portal_sessions": guarded("/internal/v1/merchants/m_token/portal_sessions", http.MethodDelete, nil),
	// {key} is a key of m_token that the test issues first.
	"/internal/v1/merchants/{id}/api_keys/{key_id}": guarded("/internal/v1/merchants/m_token/api_keys/{key}", http.MethodDelete, nil),
	"/internal/v1/merchants/{id}/api_keys/{key_id}/roll": guarded("/internal/v1/merchants/m_token/api_keys/{key}/roll", http.MethodPost,
		map[string]any{"overlap_seconds": 60}),
	"/internal/v1/events": guarded("/internal/v1/events", http.MethodPost,
		map[string]any{"merchant_id": "m_token", "type": "payout.paid", "payload": map[string]any{"id": "po_1"}}),
	"/internal/v1/events/batch": guarded("/internal/v1/events/batch", http.MethodPost,
		map[string]any{"events": []any{map[string]any{"merchant_id": "m_token", "type": "payout.paid", "payload": map[string]any{}}}}),
	// {event} is a scheduled event of m_token that the test publishes first.
	"/internal/v1/events/{id}/cancel": guarded("/internal/v1/events/{event}/cancel", http.MethodPost, nil),
}

// TestInternalTokenOnEveryRoute: every token-guarded route of the internal
// listener, with every method it serves, is 401 without the ingest token,
// with a wrong one (longer, shorter, another scheme), and always when no
// token is configured; the right token gets a valid call past the guard.
// Only the probes and the metrics are open.
func TestInternalTokenOnEveryRoute(t *testing.T) {
	t.Parallel()
	h := newHarness(t).twin()
	none := h.twin(func(c *admin.Config) { c.IngestToken = "" })
	var patterns []string
	walked := routesOf(t, none.server.Internal())
	for _, route := range walked {
		_, pattern, _ := strings.Cut(route, " ")
		patterns = append(patterns, pattern)
	}
	tableCovers(t, internalRoutes, slices.Compact(patterns), "internalRoutes")

	key, err := merchants.NewKeyIssuer(h.store.APIKeys, "sandbox", admin.DefaultVersion).Create(t.Context(), "m_token", []string{admin.ScopeRead})
	if err != nil {
		t.Fatal(err)
	}
	scheduled := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: map[string]any{"merchant_id": "m_token",
		"type": "payout.paid", "payload": map[string]any{}, "deliver_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}).JSON(t)["id"]
	wrong := []string{omitHeader, "-", "Bearer ", "Bearer wrong", "Bearer " + testIngestToken + "x",
		"Bearer " + testIngestToken[:len(testIngestToken)-1], "Basic " + testIngestToken, testIngestToken}
	for _, route := range walked {
		method, pattern, _ := strings.Cut(route, " ")
		rt, ok := internalRoutes[pattern]
		rt.path = strings.NewReplacer("{key}", key.ID.String(), "{event}", fmt.Sprint(scheduled)).Replace(rt.path)
		switch {
		case !ok:
			continue
		case rt.open:
			if method != http.MethodGet {
				continue
			}
			if r := h.doInternal(request{Method: method, Path: rt.path, Header: map[string]string{"Authorization": omitHeader}}); r.Status != http.StatusOK {
				t.Errorf("open %s: %d %q", route, r.Status, truncate(r.Body, 200))
			}
			continue
		}
		refuse := func(tw twin, auth string) {
			r := tw.doInternal(request{Method: method, Path: rt.path, Body: rt.body, Header: map[string]string{"Authorization": auth}})
			msg := refusal(r, false, http.StatusUnauthorized, "authentication_required")
			if method == http.MethodHead && r.Status == http.StatusUnauthorized {
				msg = "" // no body to a HEAD
			}
			if msg != "" {
				t.Errorf("%s with Authorization %q (token configured: %t): %s", route, auth, tw.cfg.IngestToken != "", msg)
			}
		}
		for _, auth := range wrong {
			refuse(h, auth)
		}
		for _, auth := range []string{omitHeader, "Bearer ", "Bearer " + testIngestToken} {
			refuse(none, auth)
		}
		if method == rt.control {
			r := h.doInternal(request{Method: method, Path: rt.path, Body: rt.body})
			if r.Status == http.StatusUnauthorized || r.Status == http.StatusNotFound || r.Status == http.StatusMethodNotAllowed || r.Status >= 500 {
				t.Errorf("%s with the right token: %d %q", route, r.Status, truncate(r.Body, 200))
			}
		}
	}
}
