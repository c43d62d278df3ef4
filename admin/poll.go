package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher/poll"
	"github.com/webhookd/webhookd/internal/store"
)

// Poller reads poll subscriptions (dispatcher/poll.Poller).
type Poller interface {
	Poll(ctx context.Context, merchantID string, id uuid.UUID, r poll.Request) (poll.Page, error)
}

// pollRetryAfter is the Retry-After, in seconds, of a long poll refused
// because its merchant holds as many as it may: a long poll is answered
// as soon as its line holds something, so a place is soon given back.
const pollRetryAfter = 1

// pollLease is how long a long poll's place lasts in Redis: longer than
// any long poll, so that only a process gone away leaves one to lapse.
const pollLease = poll.MaxWait + time.Minute

// pollHandlers serve GET /v1/webhook_subscriptions/{id}/poll.
type pollHandlers struct {
	poller Poller
	// held bounds each merchant's long polls (a read with wait) open at
	// once; a read that does not wait holds nothing.
	held *heldLimit
}

// pollItemJSON is one delivery read: the body exactly as signed (a
// string, so that a verification is byte for byte), its Standard Webhooks
// header values, and the envelope as an object (null when the body is
// encrypted).
type pollItemJSON struct {
	ID          string          `json:"id"`
	Timestamp   string          `json:"timestamp"`
	Signature   string          `json:"signature"`
	ContentType string          `json:"content_type"`
	Body        string          `json:"body"`
	Event       json.RawMessage `json:"event"`
	DeliveryID  uuid.UUID       `json:"delivery_id"`
	EventType   string          `json:"event_type"`
	Test        bool            `json:"test"`
	CreatedAt   time.Time       `json:"created_at"`
}

// pollPageJSON is a poll read's answer.
type pollPageJSON struct {
	Data     []pollItemJSON `json:"data"`
	Iterator string         `json:"iterator"`
	Done     bool           `json:"done"`
}

// poll reads a poll subscription's line: iterator, since, limit and wait
// from the query (dispatcher/poll checks their bounds).
func (h pollHandlers) poll(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := wellFormed(r.URL.RawQuery); err != nil {
		return err
	}
	q := r.URL.Query()
	req := poll.Request{Iterator: q.Get("iterator")}
	if q.Has("iterator") && req.Iterator == "" {
		return errInvalid("iterator", "iterator must be one a previous poll returned; leave it out to start at the oldest unacknowledged delivery.")
	}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > poll.MaxLimit {
			return errInvalid("limit", "limit must be an integer from 1 to "+strconv.Itoa(poll.MaxLimit)+".")
		}
		req.Limit = n
	}
	if q.Has("wait") {
		n, err := strconv.Atoi(q.Get("wait"))
		if err != nil || n < 0 || time.Duration(n)*time.Second > poll.MaxWait {
			return errInvalid("wait", "wait must be a whole number of seconds from 0 to "+strconv.Itoa(int(poll.MaxWait/time.Second))+".")
		}
		req.Wait = time.Duration(n) * time.Second
	}
	if req.Since, err = timeFilter(r, "since"); err != nil {
		return err
	}
	if h.poller == nil {
		return errNotFound
	}
	merchantID := principalOf(r.Context()).Merchant.ID
	if req.Wait > 0 {
		place, err := h.held.hold(r.Context(), merchantID)
		if err != nil {
			return err
		}
		defer place.release()
	}
	page, err := h.poller.Poll(r.Context(), merchantID, id, req)
	if err != nil {
		return err
	}
	out := pollPageJSON{Data: make([]pollItemJSON, 0, len(page.Items)), Iterator: page.Iterator, Done: page.Done}
	for _, it := range page.Items {
		item := pollItemJSON{ID: it.Signed.ID, Timestamp: it.Signed.Timestamp, Signature: it.Signed.Signature,
			ContentType: it.Signed.ContentType, Body: string(it.Signed.Body), Event: json.RawMessage("null"),
			DeliveryID: it.Delivery.ID, EventType: it.Delivery.EventType, Test: it.Delivery.Test,
			CreatedAt: it.Delivery.CreatedAt.UTC()}
		if it.Signed.ContentType == "application/json" {
			item.Event = it.Signed.Body
		}
		out.Data = append(out.Data, item)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// pollStateJSON is what a poll subscription's read shows of its line: the
// deliveries not acknowledged yet, and when it was last read (null:
// never).
type pollStateJSON struct {
	Backlog    int64      `json:"backlog"`
	LastReadAt *time.Time `json:"last_read_at"`
}

// pollStateReads is what the subscription routes read of poll
// subscriptions' lines.
type pollStateReads interface {
	// PollStates reads the state of poll subscriptions' lines.
	PollStates(ctx context.Context, subscriptionIDs []uuid.UUID) (map[uuid.UUID]store.PollState, error)
}

// pollLines reads the lines of the poll subscriptions among subs, in one
// query for a whole page (none when there is no poll subscription). A
// failed read is logged and leaves the lines out rather than failing the
// read of the subscriptions: pollView then shows none.
func (h subscriptionHandlers) pollLines(ctx context.Context, subs ...store.Subscription) map[uuid.UUID]store.PollState {
	var ids []uuid.UUID
	for _, sub := range subs {
		if sub.Destination.Type() == store.DestinationPoll {
			ids = append(ids, sub.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	states, err := h.polls.PollStates(ctx, ids)
	if err != nil {
		h.changes.logger.WarnContext(ctx, "read poll line states", "subscriptions", len(ids), "error", err)
		return nil
	}
	return states
}

// pollView is sub's line as lines (pollLines) hold it; nil unless sub is a
// poll subscription whose line was read (PollStates answers every id it
// is given).
func pollView(sub store.Subscription, lines map[uuid.UUID]store.PollState) *pollStateJSON {
	st, ok := lines[sub.ID]
	if !ok {
		return nil
	}
	return &pollStateJSON{Backlog: st.Backlog, LastReadAt: utcPtr(st.LastReadAt)}
}
