package asyncapi_test

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/webhookd/webhookd/internal/asyncapi"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/destination/kinds"
)

// build is the document of the default catalogue, an added type and
// every destination kind of this build.
func build(t *testing.T) (asyncapi.Config, []byte) {
	t.Helper()
	registry, err := kinds.Default(kinds.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := asyncapi.Config{Types: catalogue.New(append(catalogue.Names(), "card.captured")).Entries(),
		Kinds: registry.Metadata(), APIVersion: "2026-05-01"}
	doc, err := asyncapi.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, doc
}

// compile compiles the JSON Schema in file (draft-07 unless it says).
func compile(t *testing.T, url string, schema []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The document is a valid AsyncAPI 3.0.0 document by the AsyncAPI
// Initiative's own JSON Schema (testdata/README.md says which).
func TestDocumentValidatesAgainstTheAsyncAPISchema(t *testing.T) {
	_, doc := build(t)
	spec, err := os.ReadFile("testdata/asyncapi-3.0.0-without-id.json")
	if err != nil {
		t.Fatal(err)
	}
	s := compile(t, "file:///asyncapi-3.0.0.json", spec)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("the document is not valid AsyncAPI 3.0.0: %v", err)
	}
	// And the schema is strict enough to notice a broken document.
	var broken map[string]any
	_ = json.Unmarshal(doc, &broken)
	broken["operations"].(map[string]any)["receiveWebhook"].(map[string]any)["action"] = "publish"
	if s.Validate(broken) == nil {
		t.Fatal("an operation with action publish passed")
	}
}

// Every event type is a message on every channel, and every destination
// kind of the registry a channel, drawn from its metadata; each message's
// example (envelope, headers) matches its own schemas, read as draft
// 2020-12.
func TestDocumentHasEveryTypeAndKind(t *testing.T) {
	cfg, doc := build(t)
	var d struct {
		Channels map[string]struct {
			Messages    map[string]map[string]string `json:"messages"`
			Destination json.RawMessage              `json:"x-webhookd-destination"`
		} `json:"channels"`
		Components struct {
			Messages map[string]struct {
				Payload  json.RawMessage `json:"payload"`
				Examples []struct {
					Headers json.RawMessage `json:"headers"`
					Payload json.RawMessage `json:"payload"`
				} `json:"examples"`
			} `json:"messages"`
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	var channels []string
	for name := range d.Channels {
		channels = append(channels, name)
	}
	want := asyncapi.ChannelNames(cfg.Kinds)
	slices.Sort(channels)
	slices.Sort(want)
	if !slices.Equal(channels, want) || len(want) != 1+len(cfg.Kinds) {
		t.Fatalf("channels %v, want %v", channels, want)
	}
	for _, k := range cfg.Kinds {
		if len(d.Channels[k.Type].Destination) == 0 {
			t.Errorf("channel %s has no destination shape", k.Type)
		}
	}
	headers := compile(t, "urn:test:headers", d.Components.Schemas["headers"])
	for _, et := range cfg.Types {
		m, ok := d.Components.Messages[et.Name]
		if !ok || len(m.Examples) != 1 {
			t.Errorf("no message for %s", et.Name)
			continue
		}
		for name, ch := range d.Channels {
			if ch.Messages[et.Name]["$ref"] != "#/components/messages/"+et.Name {
				t.Errorf("channel %s lacks %s", name, et.Name)
			}
		}
		withDialect := append([]byte(`{"$schema":"`+catalogue.SchemaDialect+`",`), m.Payload[1:]...)
		payload := compile(t, "urn:test:"+et.Name, withDialect)
		for _, check := range []struct {
			s *jsonschema.Schema
			v json.RawMessage
		}{{payload, m.Examples[0].Payload}, {headers, m.Examples[0].Headers}} {
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(check.v))
			if err != nil {
				t.Fatal(err)
			}
			if err := check.s.Validate(v); err != nil {
				t.Errorf("%s: the example does not match its schema: %v", et.Name, err)
			}
		}
	}
}

// The same configuration is always the same bytes.
func TestDocumentIsStable(t *testing.T) {
	_, a := build(t)
	_, b := build(t)
	if !bytes.Equal(a, b) {
		t.Fatal("two builds differ")
	}
}
