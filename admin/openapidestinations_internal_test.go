package admin

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/kinds"
)

// updateOpenAPI rewrites admin/openapi.json's destination schemas from
// the kinds' metadata: go test ./admin -run TestOpenAPIDestinationsFromKinds -update
var updateOpenAPI = flag.Bool("update", false, "rewrite openapi.json's destination schemas from the destination kinds")

// destinationSchemas are the schemas whose destination property the
// kinds' metadata draws: each write schema refuses any other field, each
// read one keeps what only a read shows (sqs's credentials, gcp_pubsub's
// client_email), written by hand.
var destinationSchemas = []struct {
	name          string
	legacy, write bool
}{
	{"WebhookSubscription", false, false}, {"WebhookSubscriptionCreate", false, true}, {"WebhookSubscriptionUpdate", false, true},
	{"LegacyWebhookSubscription", true, false}, {"LegacyWebhookSubscriptionCreate", true, true}, {"LegacyWebhookSubscriptionUpdate", true, true},
}

// TestOpenAPIDestinationsFromKinds: the API's document lists every kind
// of the registry in each destination schema, with each kind's fields as
// its metadata describes them, so that a new kind is documented by its
// package alone (-update writes the document).
func TestOpenAPIDestinationsFromKinds(t *testing.T) {
	registry, err := kinds.Default(kinds.Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	out := raw
	for _, s := range destinationSchemas {
		dest := schemas[s.name].(map[string]any)["properties"].(map[string]any)["destination"].(map[string]any)
		old, _ := dest["properties"].(map[string]any)
		props := destinationProperties(registry, s.legacy, s.write, old)
		if jsonEqual(old, props) {
			continue
		}
		if !*updateOpenAPI {
			t.Errorf("%s.destination does not document the kinds as their metadata does: go test ./admin -run TestOpenAPIDestinationsFromKinds -update", s.name)
			continue
		}
		if out, err = spliceProperties(out, s.name, props); err != nil {
			t.Fatal(err)
		}
	}
	if *updateOpenAPI && !bytes.Equal(out, raw) {
		if err := os.WriteFile("openapi.json", out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// spliceProperties replaces, in the document's text, the properties of
// schema's destination with props, indented where they stand: the rest of
// the document keeps its order and its bytes.
func spliceProperties(doc []byte, schema string, props map[string]any) ([]byte, error) {
	text := string(doc)
	at := strings.Index(text, "\n      \""+schema+"\": {")
	if at < 0 {
		return nil, fmt.Errorf("schema %s not found", schema)
	}
	rel := strings.Index(text[at:], "\"destination\": {")
	if rel < 0 {
		return nil, fmt.Errorf("%s has no destination", schema)
	}
	dest := at + rel
	rel = strings.Index(text[dest:], "\"properties\": {")
	if rel < 0 {
		return nil, fmt.Errorf("%s.destination has no properties", schema)
	}
	open := dest + rel + len("\"properties\": ")
	end, err := objectEnd(text, open)
	if err != nil {
		return nil, err
	}
	indent := text[strings.LastIndex(text[:open], "\n")+1 : open]
	indent = indent[:len(indent)-len(strings.TrimLeft(indent, " "))]
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(indent, "  ")
	if err := enc.Encode(props); err != nil {
		return nil, err
	}
	return []byte(text[:open] + strings.TrimSuffix(b.String(), "\n") + text[end:]), nil
}

// objectEnd is the index just past the JSON object that starts at
// text[open], strings skipped.
func objectEnd(text string, open int) (int, error) {
	depth, inString := 0, false
	for i := open; i < len(text); i++ {
		switch c := text[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unterminated object at %d", open)
}

// destinationProperties are a destination schema's properties: type (the
// kinds, and webhook on a write, and poll), then every field of every
// kind, described per kind; on a read, the properties of old no kind
// names are kept.
func destinationProperties(registry *destination.Registry, legacy, write bool, old map[string]any) map[string]any {
	types := slices.Concat([]string{}, registry.Types(), []string{"poll"})
	if write {
		types = slices.Concat([]string{"webhook"}, types)
	}
	props := map[string]any{"type": map[string]any{"type": "string", "enum": types}}
	name := func(n string) string {
		if legacy {
			return camelCase(n)
		}
		return n
	}
	described := map[string][]string{}
	for _, md := range registry.Metadata() {
		for _, f := range md.Fields {
			n := name(f.Name)
			if _, ok := props[n]; !ok {
				props[n] = fieldSchema(f, legacy)
			}
			described[n] = append(described[n], md.Type+": "+fieldWords(f))
		}
	}
	for n, words := range described {
		props[n].(map[string]any)["description"] = strings.Join(words, " ")
	}
	if !write {
		for n, v := range old {
			if _, ok := props[n]; !ok {
				props[n] = v
			}
		}
	}
	return props
}

// fieldSchema is a field's JSON schema.
func fieldSchema(f destination.Field, legacy bool) map[string]any {
	s := map[string]any{}
	switch f.Type {
	case destination.FieldBool:
		s["type"] = "boolean"
	case destination.FieldStrings:
		s["type"] = "array"
		s["items"] = map[string]any{"type": "string"}
	case destination.FieldObject:
		s["type"] = "object"
		members := map[string]any{}
		for _, m := range f.Fields {
			ms := fieldSchema(m, legacy)
			ms["description"] = fieldWords(m)
			if legacy {
				members[camelCase(m.Name)] = ms
			} else {
				members[m.Name] = ms
			}
		}
		s["properties"] = members
	default:
		s["type"] = "string"
	}
	if len(f.Choices) > 0 {
		s["enum"] = f.Choices
	}
	return s
}

// fieldWords are a field's label and help, and whether reads mask it.
func fieldWords(f destination.Field) string {
	words := f.Label
	if f.Help != "" {
		words += ". " + f.Help
	}
	if f.Secret {
		words += " Secret: reads mask it."
	}
	if f.Required {
		words += " Required."
	}
	return strings.TrimSpace(words)
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
