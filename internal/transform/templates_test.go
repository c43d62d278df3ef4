package transform_test

import (
	"encoding/json"
	"testing"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/transform"
)

// TestTemplates: each template runs on every catalogue example and gives
// its shape.
func TestTemplates(t *testing.T) {
	s := sandbox(t, testLimits)
	checks := map[string]func(json.RawMessage) bool{
		"slack": func(p json.RawMessage) bool {
			var m struct {
				Text   string            `json:"text"`
				Blocks []json.RawMessage `json:"blocks"`
			}
			return json.Unmarshal(p, &m) == nil && m.Text != "" && len(m.Blocks) == 2
		},
		"flat_form": func(p json.RawMessage) bool {
			var row map[string]any
			if json.Unmarshal(p, &row) != nil || row["event_type"] == nil {
				return false
			}
			for _, v := range row {
				switch v.(type) {
				case map[string]any, []any:
					return false
				}
			}
			return true
		},
	}
	for _, tpl := range transform.Templates() {
		p, err := s.Compile(t.Context(), tpl.Code)
		if err != nil {
			t.Fatalf("%s: %v", tpl.Name, err)
		}
		for _, et := range catalogue.Default() {
			out, err := s.Run(t.Context(), p, transform.Input{EventType: et.Name, Payload: et.Example, URL: "https://hooks.example/in"})
			if err != nil || !checks[tpl.Name](out.Payload) {
				t.Fatalf("%s on %s: %s, %v", tpl.Name, et.Name, out.Payload, err)
			}
		}
	}
}
