// Package asyncapi writes the AsyncAPI 3.0 document of a deployment's
// event catalogue (GET /v1/asyncapi.json): a message per event type,
// each the envelope around the type's payload schema with the Standard
// Webhooks headers, and a channel per way of receiving them (the HTTPS
// endpoint and each destination kind of the registry). A receiver can be
// generated from it.
package asyncapi

import (
	"encoding/json"
	"fmt"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/destination"
)

// Version is the AsyncAPI version of the document.
const Version = "3.0.0"

// Config is what the document describes.
type Config struct {
	// Types are the catalogue's entries (catalogue.Catalogue.Entries):
	// one message each.
	Types []catalogue.EventType
	// Kinds are the destination kinds (destination.Registry.Metadata):
	// one channel each, beside the HTTPS endpoint's. Nil: the endpoint's
	// alone.
	Kinds []destination.Metadata
	// APIVersion is the latest API version, the document's version.
	APIVersion string
}

// webhookChannel is the channel of the HTTPS endpoint, which every
// deployment has.
const webhookChannel = "webhook"

// Build writes the document. Its bytes depend only on cfg: maps are
// encoded with sorted keys.
func Build(cfg Config) ([]byte, error) {
	messages := map[string]any{}
	refs := map[string]any{}
	var refList []any
	for _, et := range cfg.Types {
		m, err := message(et)
		if err != nil {
			return nil, err
		}
		messages[et.Name] = m
		ref := map[string]any{"$ref": "#/components/messages/" + et.Name}
		refs[et.Name] = ref
		refList = append(refList, ref)
	}
	channels := map[string]any{webhookChannel: map[string]any{
		"address": nil,
		"title":   "HTTPS endpoint",
		"description": "One POST of the envelope to the subscription's url per delivery attempt, signed with the subscription's " +
			"secret (the webhook-signature header). Answer 2xx within the delivery timeout (25 seconds by default); anything else is retried.",
		"messages": refs,
		"bindings": map[string]any{"http": map[string]any{"bindingVersion": "0.3.0"}},
	}}
	operations := map[string]any{"receiveWebhook": operation(webhookChannel, refList)}
	for _, k := range cfg.Kinds {
		channels[k.Type] = kindChannel(k, refs)
		operations["receive_"+k.Type] = operation(k.Type, refList)
	}
	doc := map[string]any{
		"asyncapi": Version,
		"info": map[string]any{
			"title":   "webhookd events",
			"version": cfg.APIVersion,
			"description": "The events webhookd delivers, as a receiver sees them: each message is the envelope " +
				"(id, type, api_version, payload, date) around its event type's payload, with the Standard Webhooks " +
				"headers. Payload schemas are JSON Schema draft 2020-12 written with the keywords draft-07 shares; " +
				"members may be added to any object without a new API version, so accept members you do not know.",
		},
		"defaultContentType": "application/json",
		"channels":           channels,
		"operations":         operations,
		"components": map[string]any{
			"messages": messages,
			"schemas":  map[string]any{"headers": headers(), "envelope": envelope("", nil)},
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("asyncapi document: %w", err)
	}
	return b, nil
}

// operation is the receiver's operation on a channel: it receives every
// message.
func operation(channel string, refs []any) map[string]any {
	return map[string]any{"action": "receive", "channel": map[string]any{"$ref": "#/channels/" + channel}, "messages": refs}
}

// message is the message of one event type.
func message(et catalogue.EventType) (map[string]any, error) {
	var payload map[string]any
	if err := json.Unmarshal(et.Schema, &payload); err != nil {
		return nil, fmt.Errorf("asyncapi document: schema of %s: %w", et.Name, err)
	}
	// The dialect is the document's (AsyncAPI Schema, draft-07's
	// keywords), which the catalogue's schemas are written in.
	delete(payload, "$schema")
	var example any
	if err := json.Unmarshal(et.Example, &example); err != nil {
		return nil, fmt.Errorf("asyncapi document: example of %s: %w", et.Name, err)
	}
	return map[string]any{
		"name":        et.Name,
		"title":       et.Name,
		"summary":     et.Description,
		"contentType": "application/json",
		"headers":     map[string]any{"$ref": "#/components/schemas/headers"},
		"payload":     envelope(et.Name, payload),
		"examples": []any{map[string]any{
			"name": et.Name,
			"headers": map[string]any{"webhook-id": "0193a5e2-7c1d-7b3e-9f00-6d2c8b1e4a10", "webhook-timestamp": "1795597245",
				"webhook-signature": "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="},
			"payload": map[string]any{"id": "0193a5e2-7c1d-7b3e-9f00-6d2c8b1e4a10", "type": et.Name, "api_version": "2026-05-01",
				"payload": example, "date": "2026-11-23T09:14:05.123Z"},
		}},
	}, nil
}

// envelope is the schema of the delivered envelope around payload, of
// event type name; "" and nil: the envelope of any type.
func envelope(name string, payload map[string]any) map[string]any {
	typ := map[string]any{"type": "string", "description": "The event type, resource.action."}
	if name != "" {
		typ = map[string]any{"const": name}
	}
	if payload == nil {
		payload = map[string]any{"type": "object", "additionalProperties": true}
	}
	return map[string]any{
		"title":                "Envelope",
		"type":                 "object",
		"additionalProperties": true,
		"required":             []string{"id", "type", "api_version", "payload", "date"},
		"properties": map[string]any{
			"id":          map[string]any{"type": "string", "format": "uuid", "description": "The event id, the same in every attempt and redelivery: deduplicate on it."},
			"type":        typ,
			"api_version": map[string]any{"type": "string", "description": "The API version the payload was serialised at, fixed when the event was created."},
			"payload":     payload,
			"date":        map[string]any{"type": "string", "format": "date-time", "description": "When the event was created (UTC)."},
		},
	}
}

// headers is the schema of the Standard Webhooks headers every delivery
// carries (a broker's message carries them as its headers, properties or
// attributes).
func headers() map[string]any {
	return map[string]any{
		"type":                 "object",
		"additionalProperties": true,
		"description": "The Standard Webhooks headers. Verify: HMAC-SHA256 over {webhook-id}.{webhook-timestamp}.{raw body} " +
			"with the secret's bytes (whsec_ removed, base64-decoded), base64, compared in constant time with each v1, value; " +
			"refuse a timestamp older than 5 minutes. Other headers (the subscription's own, ordering, trace context) may be present.",
		"required": []string{"webhook-id", "webhook-timestamp", "webhook-signature"},
		"properties": map[string]any{
			"webhook-id":        map[string]any{"type": "string", "description": "The event id (the envelope's id)."},
			"webhook-timestamp": map[string]any{"type": "string", "pattern": "^[0-9]+$", "description": "Unix time in seconds of the attempt."},
			"webhook-signature": map[string]any{"type": "string", "pattern": "^v1,[A-Za-z0-9+/]+={0,2}( v1,[A-Za-z0-9+/]+={0,2})*$",
				"description": "One or two space-separated v1,<base64 HMAC-SHA256> values (two while a secret rotates)."},
		},
	}
}

// kindChannel is the channel of a destination kind, drawn from its
// metadata alone: its address is the subscription's destination, whose
// fields x-webhookd-destination describes as a JSON Schema.
func kindChannel(k destination.Metadata, refs map[string]any) map[string]any {
	order := "Deliveries of one ordering key may arrive out of order."
	if k.Ordered {
		order = "The deliveries of one ordering key arrive in order."
	}
	return map[string]any{
		"address":                nil,
		"title":                  k.Label,
		"description":            fmt.Sprintf("Destination %q: %s. The Standard Webhooks headers travel with each message. %s", k.Type, k.Delivers, order),
		"messages":               refs,
		"x-webhookd-destination": fieldsSchema(k.Type, k.Fields),
	}
}

// fieldsSchema is the JSON Schema of a destination object of type typ
// with fields (typ "" for a nested object).
func fieldsSchema(typ string, fields []destination.Field) map[string]any {
	props := map[string]any{}
	required := []string{}
	if typ != "" {
		props["type"] = map[string]any{"const": typ}
		required = append(required, "type")
	}
	for _, f := range fields {
		props[f.Name] = fieldSchema(f)
		if f.Required {
			required = append(required, f.Name)
		}
	}
	return map[string]any{"type": "object", "additionalProperties": false, "required": required, "properties": props}
}

// fieldSchema is the schema of one destination field.
func fieldSchema(f destination.Field) map[string]any {
	var s map[string]any
	switch f.Type {
	case destination.FieldBool:
		s = map[string]any{"type": "boolean"}
	case destination.FieldStrings:
		s = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
	case destination.FieldObject:
		s = fieldsSchema("", f.Fields)
	default:
		s = map[string]any{"type": "string"}
	}
	s["title"] = f.Label
	if f.Help != "" {
		s["description"] = f.Help
	}
	if len(f.Choices) > 0 {
		s["enum"] = f.Choices
	}
	if f.Secret {
		s["writeOnly"] = true
	}
	if f.Example != "" && (f.Type == destination.FieldString || f.Type == destination.FieldText) {
		s["examples"] = []string{f.Example}
	}
	return s
}

// ChannelNames are the document's channels for kinds: the HTTPS
// endpoint's, then one per kind (for tests and the docs).
func ChannelNames(kinds []destination.Metadata) []string {
	names := []string{webhookChannel}
	for _, k := range kinds {
		names = append(names, k.Type)
	}
	return names
}
