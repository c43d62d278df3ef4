package admin

import (
	"context"
	"encoding/json"
	"strings"
	"unicode"

	"github.com/webhookd/webhookd/internal/store"
)

// destinationInput is the destination field of a create or an update as
// the registry reads it (subscriptions.ParseDestination): the bytes sent,
// nil when absent, with the legacy surface's camelCase field names
// (queueUrl) turned into the snake_case ones (queue_url). A value that is
// not an object goes as sent, for the registry to refuse.
func destinationInput(ctx context.Context, f rawField) []byte {
	raw := f.bytes()
	if raw == nil || !isLegacy(ctx) {
		return raw
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return raw
	}
	snake := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		snake[snakeCase(k)] = v
	}
	b, err := json.Marshal(snake)
	if err != nil {
		return raw
	}
	return b
}

// destinationView is what a read shows of a subscription's destination:
// its summary (credentials masked), camelCase on the legacy surface; nil
// for an HTTP endpoint.
func destinationView(ctx context.Context, d *store.Destination) map[string]any {
	if d == nil {
		return nil
	}
	if !isLegacy(ctx) {
		return d.Summary
	}
	v := make(map[string]any, len(d.Summary))
	for k, x := range d.Summary {
		v[camelCase(k)] = x
	}
	return v
}

// snakeCase is queueUrl's snake_case, queue_url.
func snakeCase(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// camelCase is queue_url's camelCase, queueUrl.
func camelCase(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}
