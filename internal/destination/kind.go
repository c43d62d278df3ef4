// Package destination is the registry of destination kinds: where a
// subscription's deliveries go when not to an HTTP endpoint. Each kind
// lives in a package of its own under internal/destination/ and owns its
// configuration (parsed by allow-list, masked for reads, described by its
// Metadata), its sending (a Publisher opened per subscription version and
// kept by a Pool) and its tests, which run the conformance suite of
// internal/destination/desttest. The engine knows a kind only through
// this package: adding one is its package, one registration line
// (internal/destination/kinds) and its section of docs/destinations.md.
package destination

import (
	"context"
	"encoding/json"
	"net"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
)

// Kind is one way of delivering: RabbitMQ, Kafka, NATS…
type Kind interface {
	// Metadata describes the kind: its type, labels and fields. The
	// registry's allow-list of top-level fields, the API's description
	// and the portal's form are drawn from it.
	Metadata() Metadata
	// Parse reads a destination of this kind, raw being the whole object
	// as sent or as stored (its "type" included, its other members only
	// those Metadata lists), and applies the rules of its shape: those
	// that need neither DNS nor the operator's settings. A refusal is an
	// *invalid.Error naming param's field ("destination.url") and never
	// quoting its value. It runs when a destination is set and again
	// each time a stored one is opened, so that a value an older build
	// accepted is refused rather than handed to a client library.
	Parse(param string, raw json.RawMessage) (Config, error)
	// Open makes the publisher of cfg, a Config this kind's Parse
	// returned. It may connect lazily; a failure to connect is a
	// *Failure of Send, not an error here. An error of Open is a
	// *Failure too when the kind knows why (destination_invalid).
	Open(cfg Config, env Env) (Publisher, error)
}

// Config is a kind's checked configuration, the whole of it: what is
// sealed for storage (its JSON, each field named as the API names it;
// the registry adds "type") and what its Publisher is built from. It
// holds credentials: its String must not show them.
type Config interface {
	// Summary is what a read of the subscription shows: every field the
	// merchant set, each credential masked (Masked).
	Summary() map[string]any
	// Target is the subscription's url: where it delivers, in a few
	// words and without any credential ("kafka://host:9092/topic").
	Target() string
	// Addresses are the places the kind dials, for the operator's rules
	// (private hosts, https): applied once, by the registry's caller.
	Addresses() []Address
	// Plaintext names the field that makes the kind's connections carry
	// credentials or payloads in clear ("url" of an amqp:// URL, "tls"
	// of kafka without it); "" when none does.
	Plaintext() string
}

// Address is one place a destination dials, named by its field.
type Address struct {
	// Field is the field's name below the destination ("url",
	// "brokers[1]").
	Field string
	// Host is a host a dialer is given (a DNS name or an IP address),
	// for a field that is host:port or a broker URL.
	Host string
	// URL is an http(s) URL the kind's client requests (an AWS endpoint),
	// checked by the rules of a webhook URL instead.
	URL string
}

// Publisher sends the messages of one subscription's destination, over
// the connections it keeps. It is safe for concurrent use.
type Publisher interface {
	// Send publishes m before ctx's deadline (the delivery timeout). An
	// error is a failed attempt: a *Failure saying why in the merchant's
	// words (Fail), any other error is told as the code broker_unreachable
	// with nothing of its text.
	Send(ctx context.Context, m Message) (Result, error)
	// Close releases the publisher's connections; Send fails after it.
	Close() error
}

// Env is what a kind's Publisher is given to reach its target.
type Env struct {
	// Dial dials a broker's address through the deliveries' address
	// check (no private host unless allowed, checked after DNS) and the
	// egress proxy when one is set. Every connection a kind makes goes
	// through it, HTTP clients included (HTTPClient).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Timeout bounds one send, the delivery timeout; a handshake or a
	// connection takes no longer.
	Timeout time.Duration
	// Clock is the engine's clock.
	Clock clock.Clock
	// Version is the engine's version, for a User-Agent.
	Version string
}

// Result is what one send gave: the attempt as it is recorded. A kind of
// the registry sets Answer alone and reports a failure as an error; the
// Pool fills the rest (Pool.For). A built-in kind (the HTTP endpoint,
// the listener) fills it whole and returns an error only when nothing
// could be sent for an internal reason.
type Result struct {
	// Answer is the target's answer in a few words, recorded as the
	// attempt's response body ("confirmed by broker", "message id …", an
	// HTTP answer's start).
	Answer string
	// Status is the HTTP status answered; nil when none came back (every
	// kind that does not speak HTTP to the merchant).
	Status *int
	// Code is the attempt's error code; nil when the target took the
	// message.
	Code *string
	// Outcome is the attempt's outcome as metrics count it (Outcome…).
	Outcome string
	// RetryAfter is how long the target asked to be left alone (an HTTP
	// 429 or 503's Retry-After); 0 when it did not ask.
	RetryAfter time.Duration
	// Final ends the delivery whatever the schedule says: nothing can
	// receive it any more (a listener that ended).
	Final bool
	// Sent are the request's headers as recorded, credentials masked;
	// nil when the kind records none.
	Sent map[string]string
	// Started and Finished bound the send on the engine's clock;
	// Duration is its length (the target's own measure when it gives
	// one).
	Started, Finished time.Time
	Duration          time.Duration
	// Cause is the error behind a failure, in its own words: for the
	// operator's log alone (the merchant reads Code and Answer).
	Cause error
}

// Attempt outcomes, as the metrics count them.
const (
	OutcomeSuccess      = "success"
	OutcomeHTTPError    = "http_error"
	OutcomeTimeout      = "timeout"
	OutcomeNetworkError = "network_error"
	OutcomeBlocked      = "blocked"
)
