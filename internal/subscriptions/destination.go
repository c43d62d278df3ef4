package subscriptions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/signer"
)

// Destination types the subscriptions themselves know: the HTTP endpoint
// and the poll subscription. Every other type is a kind of the
// destination registry (Rules.Kinds).
const (
	// DestinationWebhook is an HTTP endpoint, the subscription's url: what
	// a subscription without a destination is.
	DestinationWebhook = "webhook"
	// DestinationPoll is dialled never: the merchant reads its deliveries
	// with GET /v1/webhook_subscriptions/{id}/poll (docs/poll.md).
	DestinationPoll = store.DestinationPoll
)

// DestinationTypes are every destination type, in the order the
// documentation lists them: the HTTP endpoint, each kind of kinds, then
// poll. It is the default of WEBHOOKD_DESTINATIONS.
func DestinationTypes(kinds *destination.Registry) []string {
	out := []string{DestinationWebhook}
	if kinds != nil {
		out = append(out, kinds.Types()...)
	}
	return append(out, DestinationPoll)
}

// Destination is a checked destination: a poll subscription's (Config
// nil) or one of a registered kind. It holds credentials: it prints as
// its type alone.
type Destination struct {
	// Type is the destination's type.
	Type string
	// Config is the kind's checked configuration.
	Config destination.Config
}

// String keeps a Destination printed by mistake from showing a credential.
func (d Destination) String() string { return "subscriptions.Destination(" + d.Type + ", redacted)" }

// GoString is String, for %#v.
func (d Destination) GoString() string { return d.String() }

// LogValue is String, for slog.
func (d Destination) LogValue() slog.Value { return slog.StringValue(d.String()) }

// parseDestination reads a destination as sent (snake_case field names):
// null or {"type": "webhook"} is an HTTP endpoint (nil), {"type": "poll"}
// a poll subscription, anything else a destination of a registered kind,
// read by the kind's allow-list. param names the field (destination).
func (c checker) parseDestination(param string, raw json.RawMessage) (*Destination, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil || fields == nil {
		return nil, invalid.Value(param, "destination_not_object",
			param+` must be an object such as {"type": "rabbitmq", ...}, or null for an HTTP endpoint.`)
	}
	var typ string
	if rawType, ok := fields["type"]; !ok || json.Unmarshal(rawType, &typ) != nil || typ == "" {
		return nil, invalid.Missing(param + ".type")
	}
	if typ == DestinationWebhook || typ == DestinationPoll {
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			if k != "type" {
				return nil, invalid.Value(param+"."+k, "destination_field_unknown",
					fmt.Sprintf("A %s destination has no field %s.", typ, invalid.Quote(k)))
			}
		}
		if typ == DestinationWebhook {
			return nil, nil
		}
		return &Destination{Type: DestinationPoll}, nil
	}
	if _, ok := c.kinds().Kind(typ); !ok {
		return nil, invalid.Value(param+".type", "destination_type_unknown", fmt.Sprintf("%s.type must be one of %s; %s is not a destination type.",
			param, strings.Join(DestinationTypes(c.rules.Kinds), ", "), invalid.Quote(typ)))
	}
	_, cfg, err := c.kinds().Parse(param, trimmed)
	if err != nil {
		return nil, err
	}
	return &Destination{Type: typ, Config: cfg}, nil
}

// batches tells whether a subscription delivering to d (nil: an HTTP
// endpoint) may batch: its kind sends a batch as one message
// (Metadata.Batches).
func (c checker) batches(d *store.Destination) bool {
	if d == nil {
		return true
	}
	k, ok := c.kinds().Kind(d.Type())
	return ok && k.Metadata().Batches
}

// kinds is the registry of the rules, an empty one when none is set.
func (c checker) kinds() *destination.Registry {
	if c.rules.Kinds != nil {
		return c.rules.Kinds
	}
	empty, _ := destination.NewRegistry()
	return empty
}

// destinationAllowed refuses a type the operator turned off.
func (c checker) destinationAllowed(param, typ string) error {
	if c.rules.Destinations == nil || slices.Contains(c.rules.Destinations, typ) {
		return nil
	}
	return invalid.Value(param+".type", "destination_type_disabled", fmt.Sprintf(
		"Destinations of type %s are turned off on this server; it delivers to %s.", invalid.Quote(typ), strings.Join(c.rules.Destinations, ", ")))
}

// destination applies the operator's rules to d, whose shape its kind
// checked (parseDestination), and returns its public summary and its
// target (the stored url: where it delivers, without credentials): the
// type turned on; each address it dials public unless private targets
// are allowed, an http(s) one by the rules of a webhook URL; no plaintext
// transport unless allowed. Each rule is written here once, for every
// kind.
func (c checker) destination(param string, d *Destination) (summary map[string]any, target string, err error) {
	if err := c.destinationAllowed(param, d.Type); err != nil {
		return nil, "", err
	}
	if d.Type == DestinationPoll {
		return pollSummary(), pollTarget, nil
	}
	for _, a := range d.Config.Addresses() {
		p := param + "." + a.Field
		if a.URL != "" {
			if _, err := c.url(p, a.URL); err != nil {
				return nil, "", err
			}
			continue
		}
		if err := c.publicHost(p, a.Host); err != nil {
			return nil, "", err
		}
	}
	if bad := destination.CheckPlaintext(param, d.Config, c.rules.AllowHTTPTargets); bad != nil {
		return nil, "", bad
	}
	summary = d.Config.Summary()
	summary["type"] = d.Type
	return summary, d.Config.Target(), nil
}

// publicHost refuses, unless private targets are allowed, a broker host
// that can only reach the service's own network (checked again when
// dialling, after DNS).
func (c checker) publicHost(param, host string) error {
	if c.rules.AllowPrivateTargets {
		return nil
	}
	if why := c.privateHost(host); why != "" {
		return invalid.Value(param, "destination_private", param+" "+why)
	}
	return nil
}

// sealDestination checks d, seals it with its summary for storage, and
// returns the target the url column holds.
func (g *Registry) sealDestination(d *Destination) (*store.Destination, string, error) {
	summary, target, err := g.check.destination("destination", d)
	if err != nil {
		return nil, "", err
	}
	sealer, err := signer.NewSealer(g.masterKey)
	if err != nil {
		return nil, "", fmt.Errorf("destination: %w", err)
	}
	plain := []byte(`{"type":"` + DestinationPoll + `"}`)
	if d.Config != nil {
		if plain, err = destination.Encode(d.Type, d.Config); err != nil {
			return nil, "", fmt.Errorf("destination: %w", err)
		}
	}
	sealed, err := sealer.Seal(string(plain))
	if err != nil {
		return nil, "", fmt.Errorf("destination: %w", err)
	}
	return &store.Destination{Sealed: sealed, Summary: summary}, target, nil
}

// destinationTarget applies the destination of a create (raw, as sent)
// or of an update that sets one: a broker destination is sealed and its
// target is the url; an HTTP endpoint (nil) takes rawURL, which must then
// be given and must be a webhook URL. A url beside a broker destination is
// refused: it would never be used.
func (g *Registry) destinationTarget(raw json.RawMessage, rawURL *string) (*store.Destination, string, error) {
	d, err := g.check.parseDestination("destination", raw)
	if err != nil {
		return nil, "", err
	}
	if d == nil {
		if err := g.check.destinationAllowed("destination", DestinationWebhook); err != nil {
			return nil, "", err
		}
		if rawURL == nil {
			return nil, "", invalid.Missing("url")
		}
		u, err := g.check.url("url", *rawURL)
		return nil, u, err
	}
	if rawURL != nil {
		return nil, "", invalid.Value("url", "url_not_allowed", fmt.Sprintf(
			"A subscription whose destination is of type %s has no url: its deliveries go to the destination.", d.Type))
	}
	return g.sealDestination(d)
}

// checkURLIsHTTP refuses an update that sets url alone on a subscription
// with a destination, whose url is the destination's target: taken, it
// changed nothing, and the answer said it was done. Making such a
// subscription an HTTP endpoint again is destination null with the url.
func checkURLIsHTTP(ctx context.Context, st Store, merchantID string, id uuid.UUID, u store.SubscriptionUpdate) error {
	if u.URL == nil || u.SetDestination {
		return nil
	}
	cur, err := st.GetSubscription(ctx, merchantID, id)
	if err != nil {
		return err
	}
	if cur.Destination == nil {
		return nil
	}
	return invalid.Value("url", "url_not_allowed", fmt.Sprintf(
		"A subscription whose destination is of type %s has no url: send \"destination\": null with the url to make it an HTTP endpoint again.",
		cur.Destination.Type()))
}
