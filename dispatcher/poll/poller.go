// Package poll serves poll subscriptions: subscriptions whose destination
// is {"type": "poll"}, which webhookd never dials and the merchant reads
// with GET /v1/webhook_subscriptions/{id}/poll. Their deliveries are made
// by the fan-out like any other (internal/store/poll.go gives each a
// position in its subscription's line); a read returns them signed exactly
// as an HTTP attempt would sign them, and moving on to the iterator a read
// returned acknowledges everything before it. See docs/poll.md.
package poll

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dispatcher/deliver"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// Bounds of a read.
const (
	// DefaultLimit and MaxLimit bound how many deliveries one read returns.
	DefaultLimit = 50
	MaxLimit     = 250
	// MaxWait is the longest a read waits for a delivery when its line is
	// empty.
	MaxWait = 30 * time.Second
)

// Request is one read of a poll subscription's line.
type Request struct {
	// Iterator, when set, is where the read starts (a previous read's);
	// reading it acknowledges every delivery at or before it.
	Iterator string
	// Since, when set (and Iterator is not), starts the read at the first
	// delivery created at or after it, within the retention.
	Since *time.Time
	// Limit is how many deliveries at most (1 to MaxLimit; 0: DefaultLimit).
	Limit int
	// Wait is how long an empty read waits for a delivery (0 to MaxWait).
	Wait time.Duration
}

// Page is what a read returns.
type Page struct {
	// Items are the deliveries read, in line order.
	Items []Item
	// Iterator is where the next read starts; reading it acknowledges
	// these items.
	Iterator string
	// Done is true when the line held nothing more at the time of the
	// read; a page cut short by MaxCostlySignings is not done.
	Done bool
}

// Item is one delivery read, signed.
type Item struct {
	Delivery store.PolledDelivery
	Signed   deliver.Polled
}

// subscriptionReader is what the Poller needs of the database's
// subscriptions: the one read.
type subscriptionReader interface {
	// GetSubscription reads the merchant's subscription.
	GetSubscription(ctx context.Context, merchantID string, id uuid.UUID) (store.Subscription, error)
}

// pollLines is what the Poller needs of the database's poll lines.
type pollLines interface {
	// AcknowledgePoll acknowledges the line up to a position.
	AcknowledgePoll(ctx context.Context, subscriptionID uuid.UUID, upTo int64, now time.Time) (int, error)
	// PollAcknowledged reads the position the line is acknowledged up to.
	PollAcknowledged(ctx context.Context, subscriptionID uuid.UUID) (int64, error)
	// PollLineEnd reads the position of the line's last delivery.
	PollLineEnd(ctx context.Context, subscriptionID uuid.UUID) (int64, error)
	// MarkPollRead dates the line's last read.
	MarkPollRead(ctx context.Context, subscriptionID uuid.UUID, now time.Time) error
	// ReadPoll reads the line's deliveries from a position, at most limit.
	ReadPoll(ctx context.Context, subscriptionID uuid.UUID, from store.PollFrom, limit int) ([]store.PolledDelivery, error)
}

// PollerConfig is what the Poller needs.
type PollerConfig struct {
	// Subscriptions reads the subscription read (required).
	Subscriptions subscriptionReader
	// Polls reads and acknowledges its line (required).
	Polls pollLines
	// Secrets opens the subscriptions' signing keys (required).
	Secrets *deliver.SecretCache
	// Redis carries the fan-out's wake-ups of long polls (required): the
	// Poller's long polls share one pub/sub connection of it
	// (queue.WakeHub), made when the first waits.
	Redis redis.UniversalClient
	// MasterKey signs the iterators (required).
	MasterKey []byte
	// Clock dates signatures and acknowledgements; default the system
	// clock. Waits are real time.
	Clock clock.Clock
	// Logger receives the shared pub/sub connection's troubles; nil
	// logs nothing.
	Logger *slog.Logger
	// Registerer receives the reads' signing metric; nil registers
	// nothing.
	Registerer prometheus.Registerer
	// Wakes is the process's shared pub/sub connection, when it has one
	// (the listen connections wait on it too): the caller closes it. Nil:
	// the Poller makes its own on Redis, and Close closes it.
	Wakes *queue.WakeHub
}

func (c PollerConfig) validate() error {
	switch {
	case c.Subscriptions == nil || c.Polls == nil || c.Secrets == nil || c.Redis == nil:
		return errors.New("poller: Subscriptions, Polls, Secrets and Redis are required")
	case len(c.MasterKey) == 0:
		return errors.New("poller: MasterKey is required")
	}
	return nil
}

// Poller reads poll subscriptions' lines for their merchants.
type Poller struct {
	subscriptions subscriptionReader
	lines         pollLines
	secrets       *deliver.SecretCache
	wakes         *queue.WakeHub
	// ownsWakes: wakes is the Poller's own, closed by Close.
	ownsWakes bool
	iterators Iterators
	clock     clock.Clock
	// signed keeps the items reads signed, so that reading them again
	// signs nothing; signings counts the items read, by whether they
	// were signed afresh or taken from it.
	signed   *signedCache
	signings *prometheus.CounterVec
}

// NewPoller checks cfg and builds the Poller.
func NewPoller(cfg PollerConfig) (*Poller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	signings := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhookd_poll_items_total",
		Help: "Items poll reads returned, by source: signed (signed, and encrypted if so set, for the read) or cached (signed by a read of the last minute).",
	}, []string{"source"})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(signings); err != nil {
			return nil, fmt.Errorf("register poll metrics: %w", err)
		}
	}
	wakes, owns := cfg.Wakes, cfg.Wakes == nil
	if owns {
		wakes = queue.NewWakeHub(cfg.Redis, cfg.Logger)
	}
	return &Poller{subscriptions: cfg.Subscriptions, lines: cfg.Polls, secrets: cfg.Secrets, wakes: wakes, ownsWakes: owns,
		iterators: NewIterators(cfg.MasterKey), clock: cfg.Clock, signed: newSignedCache(), signings: signings}, nil
}

// Close closes the long polls' shared pub/sub connection when it is the
// Poller's own; a long poll still waiting reads its line once more and
// answers.
func (p *Poller) Close() error {
	if !p.ownsWakes {
		return nil
	}
	return p.wakes.Close()
}

// validate checks a request's bounds; it fills the default limit.
func (r *Request) validate(now time.Time) error {
	switch {
	case r.Limit == 0:
		r.Limit = DefaultLimit
	case r.Limit < 1 || r.Limit > MaxLimit:
		return invalid.Value("limit", "limit_range", fmt.Sprintf("limit must be between 1 and %d.", MaxLimit))
	}
	if r.Wait < 0 || r.Wait > MaxWait {
		return invalid.Value("wait", "wait_range", fmt.Sprintf("wait must be between 0 and %d seconds.", int(MaxWait/time.Second)))
	}
	if r.Since != nil {
		if r.Iterator != "" {
			return invalid.Value("since", "since_with_iterator", "since starts a read: it cannot be given with an iterator, which continues one.")
		}
		if r.Since.Before(now.Add(-store.Retention)) {
			return invalid.Value("since", "since_too_old", fmt.Sprintf("since must be within the last %d days: older deliveries are no longer kept.",
				int(store.Retention/(24*time.Hour))))
		}
	}
	return nil
}

// Poll reads the merchant's poll subscription id as r asks: another
// merchant's subscription, or a deleted one, is store.ErrNotFound; a
// subscription that is not a poll subscription, an iterator that is not
// one of its own, or a request out of bounds is an invalid.Error.
func (p *Poller) Poll(ctx context.Context, merchantID string, id uuid.UUID, r Request) (Page, error) {
	now := p.clock.Now()
	if err := r.validate(now); err != nil {
		return Page{}, err
	}
	sub, err := p.subscriptions.GetSubscription(ctx, merchantID, id)
	if err != nil {
		return Page{}, err
	}
	if sub.Destination.Type() != store.DestinationPoll {
		return Page{}, invalid.Value("id", "not_poll_subscription",
			`Only a subscription whose destination is {"type": "poll"} is read by poll; this one is delivered to.`)
	}
	from, err := p.start(ctx, sub, r, now)
	if err != nil {
		return Page{}, err
	}
	page, err := p.read(ctx, sub, from, r.Limit)
	if err != nil || len(page.Items) > 0 || r.Wait == 0 {
		return page, err
	}
	return p.await(ctx, sub, from, r)
}

// start is where a read begins: after its iterator, whose every delivery
// it first acknowledges; at since; or after what is acknowledged already.
// Every read dates the line's last read.
func (p *Poller) start(ctx context.Context, sub store.Subscription, r Request, now time.Time) (store.PollFrom, error) {
	switch {
	case r.Iterator != "":
		after, err := p.iterators.Parse(sub.ID, r.Iterator)
		if err != nil {
			return store.PollFrom{}, invalid.Value("iterator", "iterator_invalid",
				"iterator is not one this subscription's poll returned.")
		}
		if _, err := p.lines.AcknowledgePoll(ctx, sub.ID, after, now); err != nil {
			return store.PollFrom{}, err
		}
		return store.PollFrom{After: after}, nil
	case r.Since != nil:
		// The line's end is read before the deliveries: an empty read's
		// iterator then names no delivery that the read could have missed.
		end, err := p.lines.PollLineEnd(ctx, sub.ID)
		if err != nil {
			return store.PollFrom{}, err
		}
		if err := p.lines.MarkPollRead(ctx, sub.ID, now); err != nil {
			return store.PollFrom{}, err
		}
		return store.PollFrom{Since: r.Since, End: end}, nil
	}
	acked, err := p.lines.PollAcknowledged(ctx, sub.ID)
	if err != nil {
		return store.PollFrom{}, err
	}
	if err := p.lines.MarkPollRead(ctx, sub.ID, now); err != nil {
		return store.PollFrom{}, err
	}
	return store.PollFrom{After: acked}, nil
}

// read reads one page from from and signs it. An item a read signed
// within the last minute is served as it was signed (signedCache); a page
// that would sign afresh more than MaxCostlySignings items at a cost
// (costlySigning) ends early, not done, for the next read to go on.
func (p *Poller) read(ctx context.Context, sub store.Subscription, from store.PollFrom, limit int) (Page, error) {
	ds, err := p.lines.ReadPoll(ctx, sub.ID, from, limit+1)
	if err != nil {
		return Page{}, err
	}
	page := Page{Done: len(ds) <= limit, Items: make([]Item, 0, min(len(ds), limit))}
	ds = ds[:min(len(ds), limit)]
	position := from.After
	if from.Since != nil {
		position = from.End
	}
	now := p.clock.Now()
	var sig *deliver.Signing
	costly := 0
	for _, d := range ds {
		key := signedKey{subscription: sub.ID, delivery: d.ID, version: sub.UpdatedAt}
		signed, ok := p.signed.get(key, now)
		if ok {
			p.signings.WithLabelValues("cached").Inc()
		} else {
			if sig == nil {
				s, err := p.secrets.PollSigning(ctx, sub, now)
				if err != nil {
					return Page{}, err
				}
				sig = &s
			}
			if costlySigning(*sig) {
				if costly == MaxCostlySignings {
					page.Done = false
					break
				}
				costly++
			}
			if signed, err = sig.SignPolled(d, sub.PayloadStyle, now); err != nil {
				return Page{}, err
			}
			p.signed.put(key, signed, now)
			p.signings.WithLabelValues("signed").Inc()
		}
		page.Items = append(page.Items, Item{Delivery: d, Signed: signed})
		position = d.Position
	}
	page.Iterator = p.iterators.Make(sub.ID, position)
	return page, nil
}

// costlySigning tells whether signing an item with s costs more than a
// hash: an encryption to the merchant's key, or an Ed25519 signature.
func costlySigning(s deliver.Signing) bool {
	if s.Encryption != nil {
		return true
	}
	return slices.ContainsFunc(s.Keys, func(k signer.SigningKey) bool { return k.Scheme() != signer.SchemeHMACSHA256 })
}

// await waits up to r.Wait for the line to hold a delivery after from,
// woken by the fan-out through Redis (queue.WakePollers), and reads it.
// The wait is registered, and its subscription confirmed, before the line
// is read again, so that a delivery committed between the first read and
// the subscription is read, not waited for. A subscription Redis has not
// confirmed by the end of the wait (Redis away) leaves a last read.
func (p *Poller) await(ctx context.Context, sub store.Subscription, from store.PollFrom, r Request) (Page, error) {
	timer := time.NewTimer(r.Wait)
	defer timer.Stop()
	w, err := p.wakes.Wait(queue.PollChannel(sub.ID))
	if errors.Is(err, queue.ErrWakeHubClosed) {
		return p.read(ctx, sub, from, r.Limit) // shutting down: no wait
	}
	if err != nil {
		return Page{}, fmt.Errorf("wait for poll line %s: %w", sub.ID, err)
	}
	defer w.Close()
	select {
	case <-w.Ready():
	case <-timer.C:
		return p.read(ctx, sub, from, r.Limit)
	case <-ctx.Done():
		return Page{}, ctx.Err()
	}
	for {
		page, err := p.read(ctx, sub, from, r.Limit)
		if err != nil || len(page.Items) > 0 {
			return page, err
		}
		select {
		case <-w.Woken():
		case <-timer.C:
			return page, nil
		case <-ctx.Done():
			return Page{}, ctx.Err()
		}
	}
}
