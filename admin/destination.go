package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// destinationInput is the destination field of a create or an update as
// the registry reads it (subscriptions.ParseDestination): the bytes sent,
// nil when absent, with the legacy surface's camelCase field names
// (queueUrl) turned into the snake_case ones (queue_url). A value that is
// not an object goes as sent, for the registry to refuse. On the legacy
// surface a field is named in camelCase alone: queue_url there is refused
// naming it, as the surface's document has no such field (one spelling
// per surface, the rest refused, as for every other field).
func destinationInput(ctx context.Context, f rawField) ([]byte, error) {
	raw := f.bytes()
	if raw == nil || !isLegacy(ctx) {
		return raw, nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return raw, nil
	}
	snake := make(map[string]json.RawMessage, len(fields))
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if camelCase(snakeCase(k)) != k {
			return nil, invalid.Value("destination."+k, "destination_field_unknown", fmt.Sprintf(
				"A destination on these routes names its fields in camelCase: %s, not %s.", invalid.Quote(camelCase(snakeCase(k))), invalid.Quote(k)))
		}
		snake[snakeCase(k)] = fields[k]
	}
	b, err := json.Marshal(snake)
	if err != nil {
		return raw, nil
	}
	return b, nil
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
