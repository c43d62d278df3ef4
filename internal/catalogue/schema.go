package catalogue

import (
	"embed"
	"encoding/json"
	"fmt"
)

// SchemaDialect is the JSON Schema draft every payload schema is written
// in. The schemas use only keywords that draft-07 reads the same way, so
// that an AsyncAPI document can carry them as its own Schema Objects.
const SchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// schemaFiles are the payload schemas of the resource families, one file
// each (schemas/payout.json…). An event type's schema is its family's
// narrowed to the event (schemaOf).
//
//go:embed schemas/*.json
var schemaFiles embed.FS

// schemaOf is the payload schema of an event of family in status: the
// family's file with status fixed to the event's and failure an object
// only when the event reports a failure; status "" keeps the file as it
// is. It is nil if the file is missing or unreadable, which the tests
// catch: a catalogue type without a schema fails them.
func schemaOf(family, status string) json.RawMessage {
	s, err := familySchema(family)
	if err != nil {
		return nil
	}
	props, _ := s["properties"].(map[string]any)
	if status != "" && props != nil {
		props["status"] = map[string]any{"const": status}
		if failure, ok := props["failure"].(map[string]any); ok {
			if status == "failed" {
				failure["type"] = "object"
			} else {
				props["failure"] = map[string]any{"type": "null", "description": "null: the event reports no failure."}
			}
		}
	}
	return marshalSchema(s)
}

// familySchema reads a family's file, with the dialect declared.
func familySchema(family string) (map[string]any, error) {
	b, err := schemaFiles.ReadFile("schemas/" + family + ".json")
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", family, err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("schema of %s: %w", family, err)
	}
	s["$schema"] = SchemaDialect
	return s, nil
}

// addedSchema is the schema of a type the operator added: webhookd knows
// no more of its payload than that it is an object.
func addedSchema() json.RawMessage {
	return marshalSchema(map[string]any{
		"$schema": SchemaDialect, "title": "Payload", "type": "object", "additionalProperties": true,
		"description": "An event type this deployment adds: any JSON object.",
	})
}

// marshalSchema encodes a schema; map keys come out sorted, so the same
// schema is always the same bytes.
func marshalSchema(s map[string]any) json.RawMessage {
	b, _ := json.Marshal(s) // a map of JSON values always marshals
	return b
}
