package eventbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/awsdest"
)

// Limits of one PutEvents entry.
const (
	// MaxEntry is the most bytes EventBridge takes in one entry, counted
	// as it counts them (entrySize).
	MaxEntry = 256 << 10
	// maxDetailType is the longest detail-type EventBridge takes, in
	// characters.
	maxDetailType = 128
	// timeSize is what an entry's Time counts for, in EventBridge's
	// count of an entry's size.
	timeSize = 14
)

// BatchDetailType is the detail-type of a batch's entry, which has no
// event type of its own.
const BatchDetailType = "webhookd.batch"

var (
	// entryCode is an entry's error code as EventBridge sends them
	// (ThrottlingException): anything else an endpoint sends in its place
	// is not shown to the merchant.
	entryCode = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._:-]{0,99}$`)
	// eventID is an event id as EventBridge returns them (a UUID, at most
	// 64 characters): anything else is not shown.
	eventID = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
)

// errClosed is the cause of a send on a closed publisher.
var errClosed = errors.New("eventbridge: publisher closed")

// Detail is an entry's detail, the JSON object EventBridge hands to the
// targets of the rules that match it, as "detail":
//
//	{"webhook": {"webhook-id": "…", "webhook-timestamp": "…", "webhook-signature": "…", "content-type": "…", …},
//	 "body": "<the body exactly as signed, as a JSON string>",
//	 "event": {the envelope: id, type, created_at, data}}
//
// Body is the signed bytes as a JSON string because EventBridge parses
// the detail and renders it again for each target: an object's
// whitespace, key order and number and escape forms are its own then,
// and a signature over the bytes sent would no longer verify. A string's
// value survives any rendering: a consumer takes detail.body, decodes
// the string, and verifies those bytes with detail.webhook's headers.
// Event is the same body as an object, for the rules' patterns
// (detail.event.data.object.currency), and is absent when the body is
// not a JSON object (an encrypted subscription's JWE).
type Detail struct {
	// Webhook are the message's headers, names in lowercase.
	Webhook map[string]string `json:"webhook"`
	// Body is the body exactly as signed.
	Body string `json:"body"`
	// Event is the body as a JSON object, when it is one.
	Event json.RawMessage `json:"event,omitempty"`
}

// publisher puts one entry per Send, on a client whose connections it
// keeps until Close.
type publisher struct {
	client  *eventbridge.Client
	opts    awsdest.Client
	bus     string
	source  string
	timeout time.Duration

	// done ends the sends in flight when Close is called; mu lets Close
	// wait for them before it releases the connections, so that none is
	// opened again after.
	done   context.Context
	cancel context.CancelFunc
	mu     sync.RWMutex
	closed bool
}

// Open implements destination.Kind: the client is made now and
// connects on the first Send.
func (Kind) Open(cfg destination.Config, env destination.Env) (destination.Publisher, error) {
	c, err := destination.ConfigOf[Config]("eventbridge", cfg)
	if err != nil {
		return nil, err
	}
	opts := c.Account.Client(env)
	client := eventbridge.New(eventbridge.Options{
		Region:       opts.Region,
		Credentials:  opts.Credentials,
		HTTPClient:   opts.HTTPClient,
		Retryer:      opts.Retryer,
		BaseEndpoint: opts.BaseEndpoint,
		AppID:        "webhookd",
	})
	done, cancel := context.WithCancel(context.Background())
	return &publisher{client: client, opts: opts, bus: c.EventBus, source: c.Source, timeout: env.Timeout, done: done, cancel: cancel}, nil
}

// Send implements destination.Publisher: one PutEvents of one entry,
// which succeeds when EventBridge returns the entry's event id.
func (p *publisher) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return destination.Result{}, destination.Fail(destination.CodeUnreachable, "the destination's connection was closed", errClosed)
	}
	entry, err := p.entry(m)
	if err != nil {
		return destination.Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.done, cancel)()
	if _, ok := ctx.Deadline(); !ok && p.timeout > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeout(ctx, p.timeout)
		defer cancelTimeout()
	}
	out, err := p.client.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry}})
	if err != nil {
		return destination.Result{}, awsdest.Classify("EventBridge", err)
	}
	return answer(out)
}

// entry is m as a PutEvents entry on the destination's bus; one
// EventBridge would refuse (over MaxEntry, a detail-type over 128
// characters, text that is not UTF-8) is broker_refused here, before
// anything is sent.
func (p *publisher) entry(m destination.Message) (types.PutEventsRequestEntry, error) {
	detailType := m.EventType
	if detailType == "" {
		detailType = BatchDetailType
	}
	if utf8.RuneCountInString(detailType) > maxDetailType {
		return types.PutEventsRequestEntry{}, destination.Fail(destination.CodeRefused,
			fmt.Sprintf("the event type is longer than the %d characters of an EventBridge detail-type", maxDetailType), nil)
	}
	detail, err := frame(m)
	if err != nil {
		return types.PutEventsRequestEntry{}, err
	}
	e := types.PutEventsRequestEntry{
		EventBusName: aws.String(p.bus),
		Source:       aws.String(p.source),
		DetailType:   aws.String(detailType),
		Detail:       aws.String(detail),
	}
	if !m.SignedAt.IsZero() {
		// The attempt's signed time: the event's "time" is then the
		// webhook-timestamp, not the moment EventBridge took it.
		e.Time = aws.Time(m.SignedAt.UTC())
	}
	if n := entrySize(e); n > MaxEntry {
		return types.PutEventsRequestEntry{}, destination.Fail(destination.CodeRefused,
			"the event is larger than EventBridge takes: an entry is at most 256 KiB, and its detail holds the body twice "+
				"(the signed string and the event object)", fmt.Errorf("eventbridge: entry of %d bytes", n))
	}
	return e, nil
}

// frame is m's Detail as JSON. Text that is not UTF-8 cannot travel as
// a JSON string unchanged (it would be replaced, and the signature
// break), so it is refused; the engine's bodies and headers are UTF-8.
func frame(m destination.Message) (string, error) {
	if !utf8.Valid(m.Body) {
		return "", destination.Fail(destination.CodeRefused, "the body is not UTF-8 text, which an EventBridge event cannot carry unchanged", nil)
	}
	d := Detail{Webhook: make(map[string]string, len(m.Headers)), Body: string(m.Body)}
	for name, v := range m.Headers {
		if !utf8.ValidString(name) || !utf8.ValidString(v) {
			return "", destination.Fail(destination.CodeRefused, "a header is not UTF-8 text, which an EventBridge event cannot carry unchanged", nil)
		}
		d.Webhook[strings.ToLower(name)] = v
	}
	if trimmed := bytes.TrimSpace(m.Body); len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
		d.Event = trimmed
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// The body's '<', '>' and '&' as themselves: the entry's size is
	// EventBridge's to bound, and \u003c would only spend it.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return "", fmt.Errorf("eventbridge: frame the detail: %w", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// entrySize is an entry's size as EventBridge counts it against
// MaxEntry: 14 bytes for a Time, and the UTF-8 bytes of the source, the
// detail-type, the detail and each resource (the bus's name does not
// count).
func entrySize(e types.PutEventsRequestEntry) int {
	n := len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail))
	if e.Time != nil {
		n += timeSize
	}
	for _, r := range e.Resources {
		n += len(r)
	}
	return n
}

// answer reads PutEvents's answer of one entry. EventBridge answers 200
// even when it failed the entry, saying so in FailedEntryCount and the
// entry's ErrorCode: the credentials' rights (AccessDeniedException,
// NotAuthorizedForSourceException, NotAuthorizedForDetailTypeException)
// are auth_failed, its own trouble (InternalFailure,
// ThrottlingException) not_confirmed, any other code broker_refused.
// The entry's ErrorMessage is never shown: it can name the account and
// the role.
func answer(out *eventbridge.PutEventsOutput) (destination.Result, error) {
	if len(out.Entries) != 1 {
		return destination.Result{}, destination.Fail(destination.CodeNotConfirmed, "EventBridge answered without the event's result",
			fmt.Errorf("eventbridge: %d entries answered for 1", len(out.Entries)))
	}
	e := out.Entries[0]
	code := aws.ToString(e.ErrorCode)
	if code != "" || out.FailedEntryCount != 0 {
		said := "EventBridge failed the entry"
		if entryCode.MatchString(code) {
			said += ": " + code
		}
		err := fmt.Errorf("eventbridge: entry failed: %s", said)
		switch {
		case strings.Contains(code, "AccessDenied"), strings.HasPrefix(code, "NotAuthorized"):
			return destination.Result{}, destination.Fail(destination.CodeAuthFailed, said, err)
		case code == "InternalFailure", code == "ThrottlingException":
			return destination.Result{}, destination.Fail(destination.CodeNotConfirmed, said, err)
		}
		return destination.Result{}, destination.Fail(destination.CodeRefused, said, err)
	}
	id := aws.ToString(e.EventId)
	if id == "" {
		return destination.Result{}, destination.Fail(destination.CodeNotConfirmed, "EventBridge answered without an event id",
			errors.New("eventbridge: no event id"))
	}
	if !eventID.MatchString(id) {
		return destination.Result{Answer: "confirmed by EventBridge"}, nil
	}
	return destination.Result{Answer: "confirmed by EventBridge (event id " + id + ")"}, nil
}

// Close implements destination.Publisher: the sends in flight end, then
// the connections are released; Send fails after.
func (p *publisher) Close() error {
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.opts.CloseIdle()
	}
	return nil
}
