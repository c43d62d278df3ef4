package transform

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Input is the delivery a transformation reshapes.
type Input struct {
	// EventType is the event's type (handler cannot change it).
	EventType string
	// Payload is the envelope's payload, JSON.
	Payload json.RawMessage
	// URL is the delivery's target for HTTP kinds; "" for other kinds,
	// whose transformation may then not set one.
	URL string
	// Headers are the subscription's custom headers.
	Headers map[string]string
}

// Output is the delivery as handler returned it, checked.
type Output struct {
	// Payload is the transformed payload, JSON, at most MaxOutputBytes.
	Payload json.RawMessage
	// URL is the target, Input.URL when unchanged; CheckURL accepted a
	// changed one.
	URL string
	// Headers are the custom headers to send, by the customheaders rule.
	Headers map[string]string
	// Cancel is set when handler cancelled the delivery: nothing is sent.
	Cancel bool
	// CPUTime is the CPU time the call used, on its thread: what the
	// merchant's share is charged.
	CPUTime time.Duration
	// Duration is the call's wall time by the Sandbox's clock.
	Duration time.Duration
}

// webhook is the object handler gets (docs/transformations.md).
type webhook struct {
	EventType string            `json:"event_type"`
	Payload   json.RawMessage   `json:"payload"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	Cancel    bool              `json:"cancel"`
}

// envelopeBytes is the room the returned webhook may take beside its
// payload: the url and the headers (20 of at most 4 KiB, which JSON may
// escape) and the field names.
const envelopeBytes = 256 << 10

// maxReturned bounds the JSON handler returns, read from the engine.
func (s *Sandbox) maxReturned() int { return s.limits.MaxOutputBytes + envelopeBytes }

// Run runs p's handler on in. A handler that throws, returns a wrong
// shape, changes what it may not, or hits a limit fails with an *Error;
// any other error is webhookd's (the context ended, the engine failed).
func (s *Sandbox) Run(ctx context.Context, p *Program, in Input) (Output, error) {
	started := s.clock.Now()
	w := webhook{EventType: in.EventType, Payload: in.Payload, URL: in.URL, Headers: in.Headers}
	if w.Payload == nil {
		w.Payload = json.RawMessage("null")
	}
	if w.Headers == nil {
		w.Headers = map[string]string{}
	}
	input, err := json.Marshal(w)
	if err != nil {
		return Output{}, fmt.Errorf("transform: the input: %w", err)
	}
	res, err := s.engine.call(ctx, "wh_run", [][]byte{p.bytecode, input},
		[]uint64{uint64(s.maxReturned()), uint64(s.heapLimit()), stackCheckBytes}, s.maxReturned())
	if err != nil {
		return Output{}, err
	}
	var out Output
	switch res.status {
	case statusOK:
		out, err = s.returned(res.out, in)
	case statusThrown:
		err = thrownError(res.out, s.limits, false)
	case statusNoHandler:
		err = errNoHandler()
	default:
		err = s.statusError(res)
	}
	if err != nil {
		return Output{}, err
	}
	out.CPUTime = res.cpu
	out.Duration = s.clock.Now().Sub(started)
	return out, nil
}
