// Package publish is the API side of the pipeline: what turns a request
// into stored work.
//
//   - publisher.go: the Publisher applies every rule of a published event,
//     stores it and its deliveries with one group commit per batch of
//     publishes and parks their first attempts; filtering.go judges the
//     subscriptions' filters.
//   - redeliverer.go: the Redeliverer asks for manual attempts (redeliver,
//     recover).
//   - checker.go: the Checker tests whether an endpoint verifies
//     signatures, from the calling process.
package publish

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/filter"
	"github.com/webhookd/webhookd/internal/groupcommit"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/merchants"
	"github.com/webhookd/webhookd/internal/payloadschema"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/tracing"
	"github.com/webhookd/webhookd/producer"
)

// TestEventType is the event kind send_test_event stores (spec 6.1):
// catalogue.TestType, which the catalogue reserves.
const TestEventType = catalogue.TestType

// The rules of a published event, as they name themselves in an
// invalid.Error and in webhookd_events_refused_total{rule}.
const (
	ruleTypeReserved      = catalogue.RuleTypeReserved
	ruleTypeUnknown       = catalogue.RuleTypeUnknown
	rulePayloadNotObject  = "payload_not_object"
	rulePayloadNotJSON    = producer.RulePayloadNotJSON // the producer refuses it itself too
	ruleIDNotUUID         = producer.RuleIDNotUUID
	ruleAPIVersionUnknown = "api_version_unknown"
	ruleIDTaken           = "id_taken"
	ruleTaskUnreadable    = "task_unreadable"
)

// RefusalRules lists every rule a producer event can break, so
// that each refusal series exists, at zero, from the start.
func RefusalRules() []string {
	return []string{invalid.RuleMissing, merchants.RuleIDMalformed, ruleTypeReserved, ruleTypeUnknown,
		rulePayloadNotObject, invalid.RuleTooLarge, rulePayloadNotJSON, ruleIDNotUUID, ruleAPIVersionUnknown,
		ruleIDTaken, ruleTaskUnreadable, payloadschema.Rule, catalogue.RuleTypeOperational, producer.RuleDeliverAtPast, producer.RuleDeliverAtTooFar}
}

// testEventMessage is the message of every ping.test payload.
const testEventMessage = "This is a test event sent by webhookd. Handlers may ignore it."

// publisherEvents is what the Publisher needs of the database's events.
type publisherEvents interface {
	// MerchantsWithFilters reads the merchants of a group of publishes
	// and their subscriptions' filters for each event type.
	MerchantsWithFilters(ctx context.Context, keys []store.MerchantEventType) (map[store.MerchantEventType]store.MerchantFilters, error)
	// CreateEvents writes a group of publishes in one transaction.
	CreateEvents(ctx context.Context, writes []store.EventWrite, group []byte) ([]store.EventWritten, []error, error)
}

// publisherMerchants is what the Publisher needs of the database's
// merchants.
type publisherMerchants interface {
	// EnsureMerchant stores a merchant seen for the first time.
	EnsureMerchant(ctx context.Context, id, defaultVersion string) (store.Merchant, error)
}

// subscriptionReader reads a merchant's subscription: the one a test
// event, a redelivery or an endpoint check goes to.
type subscriptionReader interface {
	// GetSubscription reads the merchant's subscription.
	GetSubscription(ctx context.Context, merchantID string, id uuid.UUID) (store.Subscription, error)
}

// PublisherConfig is what the Publisher needs.
type PublisherConfig struct {
	// Events writes the events and reads the filters they are judged by
	// (required).
	Events publisherEvents
	// Merchants stores the merchants seen for the first time (required).
	Merchants publisherMerchants
	// Subscriptions reads the subscription a test event goes to
	// (required).
	Subscriptions subscriptionReader
	// EventTypes is the catalogue producers may publish (required).
	EventTypes []string
	// MaxPayloadBytes bounds a payload; 0 means no bound.
	MaxPayloadBytes int
	// VersionUsable tells whether a producer may name an api_version at
	// now; nil accepts any.
	VersionUsable func(version string, now time.Time) bool
	// Versions maps a merchant's pinned version to the version events are
	// serialised at; nil keeps it.
	Versions func(merchantVersion string) string
	// DefaultAPIVersion is the version a merchant seen for the first time
	// is pinned to (required).
	DefaultAPIVersion string
	// WrapMatcher, when set, wraps the judge of subscription filters: a
	// test makes one merchant's filters as slow as costly ones (many
	// regular expressions over a large payload) are.
	WrapMatcher func(Matcher) Matcher
	// TracerProvider traces publishes (tracing.go); nil traces nothing.
	TracerProvider trace.TracerProvider
	// Changes is the process's shared pub/sub connection, on which the
	// Publisher hears of changes to subscriptions made by any process
	// (SubscriptionsChanged), so that it may keep merchants and their
	// filters between publishes (merchantcache.go); nil keeps nothing,
	// every publish reads them.
	Changes *queue.WakeHub
	// Payloads judges a payload against its type's schema, last of the
	// rules (payloadschema.Validator, WEBHOOKD_PAYLOAD_VALIDATION); nil
	// judges none.
	Payloads PayloadChecker
	// Linger is how long a publish may wait for company before its group
	// is written (WEBHOOKD_PUBLISH_LINGER), at most MaxLinger; 0 never
	// waits. A publish waits only while publishes have lately come closer
	// together than Linger (another is expected within it), and only
	// until another comes: at a light, steady rate two publishes share
	// one statement and one commit, the first answered up to Linger
	// later; under load groups form without waiting, and at a rate too low
	// to find company nothing waits (groupcommit.Linger).
	Linger time.Duration
}

// MaxLinger bounds PublisherConfig.Linger: a publish's answer waits for
// its commit, and a producer's request with it.
const MaxLinger = 50 * time.Millisecond

// lingerBelow is the group size from which a lingering group is written
// at once: a pair halves the statements and commits of a light rate, and
// ending the wait there keeps it short (at 300 events/s a wait for four
// put 1.2 ms more on the p99 than a wait for two, for no less CPU;
// BENCHMARKS.md). Larger groups form by themselves under load.
const lingerBelow = 2

// PayloadChecker judges a published payload against its event type's
// schema: a refusal is an *invalid.Error naming the member at fault; a
// mismatch it only warns of is nil.
type PayloadChecker interface {
	Check(merchantID, eventType string, payload json.RawMessage) *invalid.Error
}

// Matcher judges an event against its merchant's subscription filters and
// returns the subscriptions whose filter passes.
type Matcher func(ctx context.Context, ev store.Event, subs []store.FilteredSubscription) ([]uuid.UUID, error)

func (c PublisherConfig) validate() error {
	if c.Events == nil || c.Merchants == nil || c.Subscriptions == nil {
		return errors.New("publisher: Events, Merchants and Subscriptions are required")
	}
	if err := catalogue.New(c.EventTypes).Validate(); err != nil {
		return fmt.Errorf("publisher: %w", err)
	}
	if c.DefaultAPIVersion == "" {
		return errors.New("publisher: DefaultAPIVersion is required")
	}
	if c.Linger < 0 || c.Linger > MaxLinger {
		return fmt.Errorf("publisher: Linger %s is not between 0 and %s", c.Linger, MaxLinger)
	}
	return nil
}

// Publisher applies every rule on a published event, the catalogue's on
// its type included.
// HTTP ingest, the worker that stores producer tasks and send_test_event
// all publish through it, so an event refused on one path is refused on
// every path, with the same parameter and message.
type Publisher struct {
	cfg PublisherConfig
	// types is the catalogue of cfg.EventTypes, which judges every type.
	types   catalogue.Catalogue
	filters *filter.Cache
	tasks   *queue.Enqueuer
	metrics *metrics.Set
	clock   clock.Clock
	logger  *slog.Logger
	// matcher judges an event against a merchant's filters: matchFilters,
	// or what WrapMatcher made of it.
	matcher Matcher
	// groups is the group commit of publishes: the publishes that arrive
	// while a group is being written share the next one's merchant read,
	// transaction and commit.
	groups *groupcommit.Batcher[publishRequest, published]
	// tracing makes the spans of tracing.go.
	tracing publishTracer
	// merchantsKept keeps what publishes read of merchants, while
	// changes are heard (cfg.Changes); stopWatch ends the hearing.
	merchantsKept *merchantCache
	stopWatch     chan struct{}
	// pool is this process's worker pool while it runs (StartLocally),
	// which first attempts try before the schedule; nil: none.
	pool atomic.Pointer[localPool]
}

// Starter is a worker pool of the publishing process: Start makes a first
// attempt at once, without the trip through the schedule, and reports
// whether it took it (deliver.Scheduler.Start says when it does); one it
// refuses is parked in the schedule.
type Starter interface {
	Start(queue.LaneItem) bool
}

// localPool holds a Starter for the atomic pointer, with the length of
// the lease a write takes for it.
type localPool struct {
	Starter
	leaseFor time.Duration
}

// StartLocally has the first attempts of the events p stores from now on
// offered to s, this process's own worker pool, before the schedule, until
// stop is called (a worker role that stops). A process with both roles
// thus saves each first attempt a push, a wake and a take in Redis, and
// its latency; what s refuses, and every attempt of a process without a
// pool, is parked as before. The write of an event leases, for leaseFor
// (the workers' lease), the deliveries whose first attempt may start at
// once, so that those need no lease statement of their own; one s refuses
// is parked with its lease to hand over (queue.Attempt.Handover).
func (p *Publisher) StartLocally(s Starter, leaseFor time.Duration) (stop func()) {
	lp := &localPool{Starter: s, leaseFor: leaseFor}
	p.pool.Store(lp)
	return func() { p.pool.CompareAndSwap(lp, nil) }
}

// publishRequest is one publish waiting for its group.
type publishRequest struct {
	event store.NewEvent
	to    store.Audience
	// judged is the verdict of the merchant's filters on the event, reached
	// outside the group (judgedOutside), with the event it judged; nil until
	// then.
	judged *filterVerdict
	// trace is the event's publish span, which the event keeps (invalid
	// when tracing is off).
	trace trace.SpanContext
}

// published is what one publish of a group wrote: created false when the
// event id was already stored (then the stored event and no deliveries).
type published struct {
	event      store.Event
	deliveries []store.Delivery
	created    bool
}

// NewPublisher checks cfg and starts the Publisher's group commit; Close
// stops it.
func NewPublisher(cfg PublisherConfig, tasks *queue.Enqueuer, m *metrics.Set, clock clock.Clock, logger *slog.Logger) (*Publisher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	compiler, err := filter.NewCompiler()
	if err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	p := &Publisher{cfg: cfg, types: catalogue.New(cfg.EventTypes), filters: filter.NewCache(compiler), tasks: tasks, metrics: m, clock: clock, logger: logger,
		tracing: publishTracer{tracer: tracing.Tracer(cfg.TracerProvider), clock: clock}}
	p.matcher = p.matchFilters
	if cfg.WrapMatcher != nil {
		p.matcher = cfg.WrapMatcher(p.matcher)
	}
	p.merchantsKept = newMerchantCache(clock, cfg.Events, cfg.Merchants, cfg.DefaultAPIVersion)
	p.stopWatch = make(chan struct{})
	if cfg.Changes != nil {
		w, err := cfg.Changes.Wait(SubscriptionsChangedChannel)
		if err != nil {
			return nil, fmt.Errorf("publisher: hear changes of subscriptions: %w", err)
		}
		go p.merchantsKept.watch(w, p.stopWatch)
	}
	p.groups = groupcommit.NewLingering(p.writeGroup, groupcommit.Linger[publishRequest]{Wait: cfg.Linger, Below: lingerBelow, Clock: clock})
	return p, nil
}

// Close writes the publishes queued and stops the group writer.
func (p *Publisher) Close() {
	p.groups.Close()
	close(p.stopWatch)
}

// SubscriptionsChanged is told after a change of merchantID's
// subscriptions (created, updated, enabled, disabled, deleted) or of its
// settings is committed, before the change is answered: it announces it
// to every process's Publisher, whose kept merchants are dropped, so that
// their next publishes read the change. A failure is logged: the kept
// merchants then lapse within merchantCacheTTL.
func (p *Publisher) SubscriptionsChanged(ctx context.Context, merchantID string) {
	if err := p.merchantsKept.announceChange(ctx, p.tasks.Redis); err != nil {
		p.logger.WarnContext(ctx, "announce a change of subscriptions; other processes see it within their cache's lifetime",
			"merchant_id", merchantID, "ttl", merchantCacheTTL, "error", err)
	}
}

// EventTypes is the catalogue producers may publish and subscriptions may
// name.
func (p *Publisher) EventTypes() []string { return p.types.Names() }

// Check applies every rule of a published event, in the order a producer
// would fix them, and returns the first one broken as an *invalid.Error
// naming the field. It reads nothing and writes nothing, but for the
// schema check's warning (checkSchema).
func (p *Publisher) Check(e producer.Event) error {
	if err := merchants.CheckID("merchant_id", e.MerchantID); err != nil {
		return err
	}
	if bad := p.types.CheckPublish("type", e.Type); bad != nil {
		return bad
	}
	payload := bytes.TrimSpace(e.Payload)
	switch {
	case len(payload) == 0 || bytes.Equal(payload, []byte("null")):
		return invalid.Missing("payload")
	case payload[0] != '{':
		return invalid.Value("payload", rulePayloadNotObject, "payload must be a JSON object.")
	case p.cfg.MaxPayloadBytes > 0 && len(payload) > p.cfg.MaxPayloadBytes:
		return invalid.Value("payload", invalid.RuleTooLarge, fmt.Sprintf("payload is larger than %d bytes.", p.cfg.MaxPayloadBytes))
	case !validJSON(payload):
		return invalid.Value("payload", rulePayloadNotJSON, "payload is not valid JSON.")
	}
	// Text Postgres cannot store (a NUL, invalid UTF-8) is refused here,
	// where a producer's task is refused for good, not when the fan-out
	// reads the payload as jsonb and every retry fails the same way.
	for _, bad := range []*invalid.Error{invalid.Text("type", e.Type), invalid.Text("api_version", e.APIVersion), invalid.JSON("payload", payload)} {
		if bad != nil {
			return bad
		}
	}
	if e.ID != "" {
		if _, bad := invalid.UUID("id", ruleIDNotUUID, e.ID); bad != nil {
			return bad
		}
	}
	if e.APIVersion != "" && p.cfg.VersionUsable != nil && !p.cfg.VersionUsable(e.APIVersion, p.clock.Now()) {
		return invalid.Value("api_version", ruleAPIVersionUnknown, "Unknown or sunset api_version "+invalid.Quote(e.APIVersion)+".")
	}
	if bad := producer.CheckDeliverAt(e.DeliverAt, p.clock.Now()); bad != nil {
		return bad
	}
	if bad := p.checkSchema(e); bad != nil {
		return bad
	}
	return nil
}

// checkSchema judges the payload against its type's schema
// (PublisherConfig.Payloads). It comes last, so only a payload every other
// rule accepts (a JSON object within the size limit, which bounds the
// cost) is judged.
func (p *Publisher) checkSchema(e producer.Event) *invalid.Error {
	if p.cfg.Payloads == nil {
		return nil
	}
	return p.cfg.Payloads.Check(e.MerchantID, e.Type, e.Payload)
}

// Publish checks e (Check), then stores the event and one pending delivery
// per matching enabled subscription in one transaction, which it shares
// with the publishes that arrive while the one before is being written
// (group commit), and enqueues their first attempts. created is false
// when the event id was already stored: then nothing new is written or
// enqueued and the stored event is returned.
//
// Once Publish returns, the event is durable: if enqueueing fails (Redis
// down), the sweeper enqueues the deliveries later, so that is logged, not
// returned.
func (p *Publisher) Publish(ctx context.Context, e producer.Event) (store.Event, bool, error) {
	if err := p.Check(e); err != nil {
		return store.Event{}, false, err
	}
	ev, _, created, err := p.publish(ctx, newEventOf(e), store.Audience{})
	return ev, created, err
}

// newEventOf is the event to store for e, which passed Check.
func newEventOf(e producer.Event) store.NewEvent {
	ne := store.NewEvent{MerchantID: e.MerchantID, Type: e.Type, Payload: e.Payload, APIVersion: e.APIVersion}
	if e.DeliverAt != nil {
		at := e.DeliverAt.UTC()
		ne.DeliverAt = &at
	}
	if e.ID != "" {
		id := uuid.MustParse(e.ID) // Check parsed it
		ne.ID = &id
	}
	return ne
}

// PublishAll is Publish for a batch of events, in their order: they are
// written in one group commit (or consecutive ones) rather than one after
// another. Every event is checked first, and if any breaks a rule none is
// published: errs holds the *invalid.Error of each that did. Otherwise it
// returns one event, one created flag and one error per event; an event
// the store refuses (an id another merchant holds, say) fails alone.
func (p *Publisher) PublishAll(ctx context.Context, es []producer.Event) (evs []store.Event, created []bool, errs []error) {
	evs, created, errs = make([]store.Event, len(es)), make([]bool, len(es)), make([]error, len(es))
	refused := false
	for i, e := range es {
		errs[i] = p.Check(e)
		refused = refused || errs[i] != nil
	}
	if refused {
		return evs, created, errs
	}
	reqs := make([]publishRequest, len(es))
	for i, e := range es {
		reqs[i] = publishRequest{event: newEventOf(e)}
	}
	traced := p.tracing.publishAll(ctx, reqs)
	defer func() { traced(evs, created, errs) }()
	p.metrics.PublishesWaiting.Add(float64(len(reqs)))
	defer p.metrics.PublishesWaiting.Sub(float64(len(reqs)))
	todo := make([]int, len(reqs)) // the events still to write
	for i := range todo {
		todo[i] = i
	}
	for len(todo) > 0 {
		batch := make([]publishRequest, len(todo))
		for j, i := range todo {
			batch[j] = reqs[i]
		}
		out, outErrs := p.groups.DoAll(ctx, batch)
		var again []int
		for j, i := range todo {
			evs[i], created[i] = out[j].event, out[j].created
			var v *filterVerdict
			var retry bool
			if v, retry, errs[i] = p.awaitVerdict(ctx, outErrs[j]); retry {
				reqs[i].judged = v
				again = append(again, i)
			}
		}
		todo = again
	}
	return evs, created, errs
}

// publish stores an event that passed the rules for any audience;
// send_test_event uses it with one subscription and Test set. It waits for
// the group the event is written with: once it returns without an error,
// the event is committed.
func (p *Publisher) publish(ctx context.Context, e store.NewEvent, to store.Audience) (store.Event, []store.Delivery, bool, error) {
	p.metrics.PublishesWaiting.Inc()
	defer p.metrics.PublishesWaiting.Dec()
	ctx, span := p.tracing.publish(ctx, e)
	req := publishRequest{event: e, to: to, trace: span.context()}
	for {
		out, err := p.groups.Do(ctx, req)
		v, again, err := p.awaitVerdict(ctx, err)
		if !again {
			span.end(out, err)
			return out.event, out.deliveries, out.created, err
		}
		req.judged = v // and written with the next group
	}
}

// awaitVerdict waits for the filters of a publish that writeGroup sent
// to be judged outside its group (judgedOutside), and returns their
// verdict to write it again with; again is false, and err the publish's
// outcome, when err is anything else or ctx ends first (then nothing was
// written).
func (p *Publisher) awaitVerdict(ctx context.Context, err error) (v *filterVerdict, again bool, _ error) {
	var outside judgedOutside
	if !errors.As(err, &outside) {
		return nil, false, err
	}
	select {
	case got := <-outside.verdict:
		return &got, true, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// writeGroup writes a group of publishes (group commit): one read of their
// merchants and filters, one transaction for their events and deliveries,
// then the enqueue of their first attempts. A publish refused (an id taken
// by another merchant, say) fails alone.
func (p *Publisher) writeGroup(ctx context.Context, reqs []publishRequest) ([]published, []error, error) {
	p.metrics.PublishGroups.Observe(float64(len(reqs)))
	started := p.tracing.commitStarted()
	keys := make([]store.MerchantEventType, 0, len(reqs))
	for _, r := range reqs {
		if k := (store.MerchantEventType{MerchantID: r.event.MerchantID, EventType: r.event.Type}); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	merchants, failed, err := p.merchantsKept.read(ctx, keys)
	if err != nil {
		return nil, nil, err
	}
	out, errs := make([]published, len(reqs)), make([]error, len(reqs))
	events := make([]store.Event, len(reqs))
	verdicts := make([]<-chan filterVerdict, len(reqs))
	judged := make([]bool, len(reqs)) // reqs[i].judged stands
	for i, r := range reqs {
		k := store.MerchantEventType{MerchantID: r.event.MerchantID, EventType: r.event.Type}
		if errs[i] = failed[k]; errs[i] != nil {
			continue
		}
		mf := merchants[k]
		if r.judged != nil && sameFilters(r.judged.against, mf.Filters) {
			events[i], judged[i] = r.judged.event, true // the event the filters judged
			continue
		}
		if events[i], errs[i] = p.eventOf(r.event, mf.Merchant); errs[i] == nil && r.to.SubscriptionID == nil && len(mf.Filters) > 0 {
			verdicts[i] = p.judge(ctx, events[i], mf.Filters)
		}
	}
	// The group waits for its filters up to filterBudget in all; a
	// publish whose filters take longer is judged outside it and written
	// with a later group, so that one merchant's costly filters delay its
	// own publishes only. The merchant's later publishes in the group go
	// with it, so that its events keep their order.
	budget := time.NewTimer(filterBudget)
	defer budget.Stop()
	spent := false
	outside := map[string]bool{} // merchants with a publish sent outside
	writes := make([]store.EventWrite, 0, len(reqs))
	at := make([]int, 0, len(reqs)) // the request of each write
	// The write leases the first attempts this process's pool may start
	// (StartLocally).
	var leaseUntil time.Time
	if pool := p.pool.Load(); pool != nil {
		leaseUntil = p.clock.Now().Add(pool.leaseFor).Truncate(time.Microsecond)
	}
	for i, r := range reqs {
		if errs[i] != nil {
			continue
		}
		verdict, ready := verdicts[i], false
		var v filterVerdict
		switch {
		case judged[i]:
			v, ready = *r.judged, true
		case verdict == nil:
			v, ready = filterVerdict{event: events[i]}, true
		case !spent:
			select {
			case v = <-verdict:
				ready = true
			case <-budget.C:
				spent = true
			}
		}
		if !ready && verdict != nil {
			select {
			case v = <-verdict:
				ready = true
			default:
			}
		}
		if !ready || outside[r.event.MerchantID] {
			if ready {
				done := make(chan filterVerdict, 1)
				done <- v
				verdict = done
			}
			outside[r.event.MerchantID] = true
			p.metrics.FiltersJudgedOutside.Inc()
			errs[i] = judgedOutside{verdict: verdict}
			continue
		}
		if r.to.SubscriptionID == nil {
			r.to.Matched = v.matched
		}
		if errs[i] = v.err; errs[i] != nil {
			continue
		}
		events[i].TraceParent = tracing.Traceparent(r.trace)
		writes = append(writes, store.EventWrite{Event: events[i], To: r.to, LeaseUntil: leaseUntil})
		at = append(at, i)
	}
	if len(writes) == 0 {
		return out, errs, nil
	}
	group, err := store.NewGroup()
	if err != nil {
		return nil, nil, err
	}
	written, werrs, err := p.cfg.Events.CreateEvents(ctx, writes, group)
	if err != nil {
		return nil, nil, err
	}
	var created []store.EventWritten
	for j, w := range written {
		i := at[j]
		out[i], errs[i] = published{event: w.Event, deliveries: w.Deliveries, created: w.Created}, werrs[j]
		if werrs[j] == nil && w.Created {
			created = append(created, w)
			p.metrics.EventsIngested.WithLabelValues(w.Event.Type).Inc()
			p.logger.InfoContext(ctx, "event stored", "event_id", w.Event.ID, "type", w.Event.Type, "merchant_id", w.Event.MerchantID,
				"deliveries", len(w.Deliveries))
		}
	}
	p.enqueueFirstAttempts(ctx, created)
	p.wakePollers(ctx, created)
	p.tracing.commit(ctx, started, committed{reqs: reqs, at: at, out: out, errs: errs})
	return out, errs, nil
}

// enqueueFirstAttempts starts the first attempts of the events a group
// created in this process's pool where it takes them (StartLocally), and
// parks the others in the schedule, in one push, each due at its event's
// creation, or at its deliver_at for a scheduled event. A failure is logged, not returned: the events are durable, and
// the sweeper parks their attempts later.
func (p *Publisher) enqueueFirstAttempts(ctx context.Context, created []store.EventWritten) {
	pool := p.pool.Load()
	var items []queue.LaneItem
	for _, w := range created {
		// Skipped deliveries (disabled subscriptions) wait for recover and
		// ordered ones behind their key's head wait for it: neither is due.
		for _, del := range dueNow(w.Deliveries) {
			it := queue.LaneItem{ID: queue.AttemptTaskID(del.ID, 1), Task: queue.ScheduledAttempt(del, 1, *del.NextAttemptAt)}
			if leased, ok := w.Leased[del.ID]; ok {
				it.Task.Leased = &leased
			}
			if pool != nil && pool.Start(it) {
				p.metrics.StartedLocally.Inc()
				continue
			}
			// The write may have leased it for the pool, which refused it:
			// the schedule's taker takes that lease over.
			it.Task = it.Task.Parked()
			items = append(items, it)
		}
	}
	if _, err := p.tasks.Lanes.Push(ctx, items...); err != nil {
		p.logger.WarnContext(ctx, "schedule first attempts; the sweeper will retry", "events", len(created),
			"attempts", len(items), "error", err)
	}
}

// dueNow leaves out the deliveries with no due time: ordered ones that wait
// behind an earlier one of their key (the end of that one enqueues them) and
// skipped ones (recover replays them).
func dueNow(deliveries []store.Delivery) []store.Delivery {
	return slices.DeleteFunc(slices.Clone(deliveries), func(d store.Delivery) bool { return d.NextAttemptAt == nil })
}

// newEvent is eventOf e's merchant, read (or created) for it alone, with
// the filters a fan-out of the event must evaluate.
func (p *Publisher) newEvent(ctx context.Context, e store.NewEvent) (store.Event, []store.FilteredSubscription, error) {
	k := store.MerchantEventType{MerchantID: e.MerchantID, EventType: e.Type}
	found, failed, err := p.merchantsKept.read(ctx, []store.MerchantEventType{k})
	if err = cmp.Or(err, failed[k]); err != nil {
		return store.Event{}, nil, err
	}
	ev, err := p.eventOf(e, found[k].Merchant)
	return ev, found[k].Filters, err
}

// eventOf fixes everything about the stored event of merchant m: its id,
// its api_version (the producer's, or the merchant's pinned one), its
// creation instant and its envelope bytes.
func (p *Publisher) eventOf(e store.NewEvent, m store.Merchant) (store.Event, error) {
	payload, err := compactObject(e.Payload)
	if err != nil {
		return store.Event{}, err
	}
	version := e.APIVersion
	if version == "" {
		version = m.APIVersion
		if p.cfg.Versions != nil {
			version = p.cfg.Versions(version)
		}
	}
	// Millisecond precision: the envelope date shows milliseconds, the
	// Event resource's created_at must equal it, and the deliveries' UUIDv7
	// ids carry this instant.
	now := p.clock.Now().UTC().Truncate(time.Millisecond)
	var id uuid.UUID
	if e.ID != nil {
		id = *e.ID
	} else if id, err = uuidV7At(now); err != nil {
		return store.Event{}, err
	}
	body, err := envelopeOf(id, e.Type, version, payload, now)
	if err != nil {
		return store.Event{}, err
	}
	return store.Event{ID: id, MerchantID: e.MerchantID, Type: e.Type, APIVersion: version, Body: body, CreatedAt: now,
		DeliverAt: e.DeliverAt}, nil
}

// testPayload is the payload of a ping.test event (DESIGN.md).
type testPayload struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	Message        string    `json:"message"`
}

// SendTestEvent stores a ping.test event of the merchant, at its pinned
// version, with one test delivery to subscriptionID alone (whatever its
// events list or status), and schedules it like any delivery: same
// signing, headers and retry schedule. Test deliveries never touch the
// subscription's health and never send a failure e-mail. It returns the
// delivery as created, before its first attempt.
func (p *Publisher) SendTestEvent(ctx context.Context, merchantID string, subscriptionID uuid.UUID) (store.Delivery, error) {
	// Check first, so that a stranger's or a missing subscription stores no
	// event at all.
	if _, err := p.cfg.Subscriptions.GetSubscription(ctx, merchantID, subscriptionID); err != nil {
		return store.Delivery{}, err
	}
	payload, err := json.Marshal(testPayload{SubscriptionID: subscriptionID, Message: testEventMessage})
	if err != nil {
		return store.Delivery{}, fmt.Errorf("encode test payload: %w", err)
	}
	_, deliveries, _, err := p.publish(ctx, store.NewEvent{MerchantID: merchantID, Type: TestEventType, Payload: payload},
		store.Audience{SubscriptionID: &subscriptionID, Test: true})
	if err != nil {
		return store.Delivery{}, err
	}
	if len(deliveries) != 1 {
		// Deleted between the check and the insert.
		return store.Delivery{}, fmt.Errorf("send test event to %s: %w", subscriptionID, store.ErrNotFound)
	}
	del := deliveries[0]
	del.Attempts = []store.Attempt{}
	return del, nil
}

// HandleIngest turns a producer task into a stored event. An event that
// breaks a rule is never stored nor delivered: it is refused with a log
// line and a metric naming the rule, and the refusal is kept where the
// producer reads it (producer.Refusal); the task is revoked, not archived,
// so that a corrected event with the same id can be published. An internal
// error is returned for asynq to retry.
func (p *Publisher) HandleIngest(ctx context.Context, t *asynq.Task) (err error) {
	var e producer.Event
	if err := json.Unmarshal(t.Payload(), &e); err != nil {
		return p.refuse(ctx, e, invalid.Value("payload", ruleTaskUnreadable, "The task is not a JSON event."))
	}
	if e.DeliverAt != nil && !e.DeliverAt.After(p.clock.Now()) {
		// The producer checked it was ahead when it enqueued the event,
		// which was accepted then: stored late, it is delivered at once.
		e.DeliverAt = nil
	}
	ctx, span := p.tracing.ingest(ctx, t.Payload(), e)
	defer func() { endIngest(span, err) }()
	_, _, err = p.Publish(ctx, e)
	if bad := invalid.As(err); bad != nil {
		return p.refuse(ctx, e, bad)
	}
	if errors.Is(err, store.ErrConflict) {
		return p.refuse(ctx, e, invalid.Value("id", ruleIDTaken, "The event id is taken by another merchant's event."))
	}
	if err != nil {
		return fmt.Errorf("ingest event %s: %w", e.ID, err)
	}
	// A corrected re-publish of a refused id is stored now: its refusal
	// no longer holds. (Done here, not by the producer, so that the core
	// API's publish costs one Redis call.)
	if err := p.tasks.ClearRefusal(ctx, e.ID); err != nil {
		p.logger.WarnContext(ctx, "clear the event's refusal", "event_id", e.ID, "error", err)
	}
	return nil
}

// refuse drops a producer task that breaks a rule, saying which.
func (p *Publisher) refuse(ctx context.Context, e producer.Event, bad *invalid.Error) error {
	p.metrics.EventsRefused.WithLabelValues(bad.Rule).Inc()
	p.logger.ErrorContext(ctx, "producer event refused; not stored, not delivered", "event_id", e.ID,
		"merchant_id", e.MerchantID, "rule", bad.Rule, "param", bad.Param, "reason", bad.Message)
	if e.ID != "" {
		if err := p.tasks.Refusal(ctx, e.ID, producer.Refused{Param: bad.Param, Rule: bad.Rule, Message: bad.Message}); err != nil {
			p.logger.WarnContext(ctx, "keep refusal for the producer", "event_id", e.ID, "error", err)
		}
	}
	return asynq.RevokeTask
}

// compactObject returns a checked payload compacted, so that the
// envelope's bytes do not depend on the producer's formatting.
func compactObject(p json.RawMessage) (json.RawMessage, error) {
	compact := jsontext.Value(bytes.Clone(bytes.TrimSpace(p)))
	if err := compact.Compact(); err != nil {
		return nil, fmt.Errorf("compact payload: %w", err)
	}
	return json.RawMessage(compact), nil
}

// validJSON is json.Valid, read by jsontext in a quarter of the time:
// the same grammar, duplicate names and invalid UTF-8 let through as
// json.Valid lets them (invalid.JSON names those that Postgres cannot
// store, with its own message), as compactObject does.
func validJSON(p []byte) bool {
	return jsontext.Value(p).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// envelopeHead is the delivered envelope (DESIGN.md) up to its payload;
// its field order is the order on the wire: id, type, api_version, then
// payload and date.
type envelopeHead struct {
	ID         uuid.UUID `json:"id"`
	Type       string    `json:"type"`
	APIVersion string    `json:"api_version"`
}

// Envelope builds the exact bytes every attempt of the event sends. They
// are built once, stored, and never re-serialised (spec 9.6). The payload
// is compacted first (and refused if it is not JSON).
func Envelope(id uuid.UUID, typ, version string, payload json.RawMessage, at time.Time) ([]byte, error) {
	compact, err := compactObject(payload)
	if err != nil {
		return nil, err
	}
	return envelopeOf(id, typ, version, compact, at)
}

// envelopeOf is Envelope for a payload compactObject returned. The payload
// is appended as it is: encoding/json would validate and compact it once
// more, a pass over every byte of every event for nothing.
func envelopeOf(id uuid.UUID, typ, version string, compact json.RawMessage, at time.Time) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, len(compact)+160))
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(envelopeHead{ID: id, Type: typ, APIVersion: version}); err != nil {
		return nil, fmt.Errorf("encode envelope of %s: %w", id, err)
	}
	// The head ends "}\n": the payload and the date go before its brace.
	head := bytes.TrimSuffix(buf.Bytes(), []byte("}\n"))
	out := append(head, `,"payload":`...)
	out = append(out, compact...)
	out = append(out, `,"date":"`...)
	out = at.UTC().AppendFormat(out, "2006-01-02T15:04:05.000Z07:00")
	return append(out, `"}`...), nil
}

// uuidV7At makes a UUIDv7 whose timestamp is t (milliseconds), so that an
// event id made by webhookd tells when the event was created.
func uuidV7At(t time.Time) (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.UUID{}, fmt.Errorf("new event id: %w", err)
	}
	ms := uint64(t.UnixMilli())
	for i := 0; i < 6; i++ {
		id[i] = byte(ms >> (8 * (5 - i)))
	}
	return id, nil
}
