package catalogue_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/invalid"
)

// The catalogue is spec 6.1's list of event kinds, each with a description
// and an example that is a JSON object; ping.test is not in it.
func TestDefaultIsSpecCatalogue(t *testing.T) {
	want := []string{
		"payout.created", "payout.initiated", "payout.paid", "payout.failed",
		"return.initiated", "return.paid", "return.failed", "return.returned",
		"deposit.received", "conversion.created", "conversion.succeeded", "conversion.failed",
	}
	if got := catalogue.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, et := range catalogue.Default() {
		var obj map[string]any
		if err := json.Unmarshal(et.Example, &obj); err != nil {
			t.Errorf("%s: example is not a JSON object: %v", et.Name, err)
		}
		if len(et.Schema) == 0 {
			t.Errorf("%s: no schema (internal/payloadschema's tests check each against its example)", et.Name)
		}
		if et.Description == "" || !strings.HasSuffix(et.Description, ".") {
			t.Errorf("%s: description %q is not a sentence", et.Name, et.Description)
		}
	}
}

func TestForKeepsOrderAndDescribesAddedTypes(t *testing.T) {
	got := catalogue.For([]string{"payout.paid", "card.captured"})
	if len(got) != 2 || got[0].Name != "payout.paid" || got[1].Name != "card.captured" {
		t.Fatalf("For = %+v", got)
	}
	if string(got[1].Example) != "{}" || got[1].Description == "" {
		t.Fatalf("an added type gets a generic entry, got %+v", got[1])
	}
	if !strings.Contains(string(got[0].Example), `"status":"paid"`) {
		t.Fatalf("payout.paid example = %s", got[0].Example)
	}
}

// Every resource example docs/events.md shows is one of the catalogue's
// examples, so the page and GET /v1/event_types cannot drift apart.
func TestEventsPageShowsCatalogueExamples(t *testing.T) {
	page, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(page), "```json\n")[1:]
	var checked int
	for _, b := range blocks {
		b, _, _ = strings.Cut(b, "```")
		var shown map[string]any
		if json.Unmarshal([]byte(b), &shown) != nil || shown["type"] == nil || shown["status"] == nil {
			continue // a fragment or the envelope
		}
		checked++
		if !slices.ContainsFunc(catalogue.Default(), func(et catalogue.EventType) bool {
			var ex map[string]any
			return json.Unmarshal(et.Example, &ex) == nil && reflect.DeepEqual(ex, shown)
		}) {
			t.Errorf("docs/events.md shows a %v example with status %v that no catalogue entry has", shown["type"], shown["status"])
		}
	}
	if checked < 4 {
		t.Fatalf("found %d resource examples in docs/events.md, want the payout, return, deposit and conversion ones", checked)
	}
}

// Every check of an event type asks the Catalogue; each use words its own
// refusal, and ping.test is reserved everywhere but among stored events.
func TestCatalogueJudgesEveryUse(t *testing.T) {
	c := catalogue.New([]string{"payout.paid", "card.captured"})
	long := strings.Repeat("x", 70)
	for _, tc := range []struct {
		use, typ string
		check    func(param, t string) *invalid.Error
		want     *invalid.Error // nil: allowed
	}{
		{"publish", "payout.paid", c.CheckPublish, nil},
		{"publish", "card.captured", c.CheckPublish, nil},
		{"publish", "", c.CheckPublish, invalid.Missing("p")},
		{"publish", catalogue.TestType, c.CheckPublish, invalid.Value("p", "type_reserved",
			`Unknown event type "ping.test"; ping.test is reserved for send_test_event.`)},
		{"publish", "payout.lost", c.CheckPublish, invalid.Value("p", "type_unknown",
			`Unknown event type "payout.lost"; ping.test is reserved for send_test_event.`)},
		{"subscribe", "payout.paid", c.CheckSubscribe, nil},
		{"subscribe", catalogue.TestType, c.CheckSubscribe, invalid.Value("p", "events_test_type",
			"ping.test cannot be subscribed to: send_test_event delivers it to its subscription whatever the events list.")},
		{"subscribe", long, c.CheckSubscribe, invalid.Value("p", "event_type_unknown",
			`Unknown event type "`+long[:64]+`…"; see the event catalogue.`)},
		{"trigger", "card.captured", c.CheckTrigger, nil},
		{"trigger", catalogue.TestType, c.CheckTrigger, invalid.Value("p", "type_reserved",
			"ping.test is sent to one endpoint at a time: POST /v1/webhook_subscriptions/{id}/send_test_event. "+
				"Trigger any other type GET /v1/event_types lists.")},
		{"trigger", "payout.unknown", c.CheckTrigger, invalid.Value("p", "type_unknown",
			`Unknown event type "payout.unknown"; GET /v1/event_types lists them.`)},
		{"filter", catalogue.TestType, c.CheckFilter, nil},
		{"filter", "payout.paid", c.CheckFilter, nil},
		{"filter", "", c.CheckFilter, invalid.Value("p", "type_unknown", `Unknown p "".`)},
		{"filter", "a\"b", c.CheckFilter, invalid.Value("p", "type_unknown", `Unknown p "a\"b".`)},
	} {
		got := tc.check("p", tc.typ)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s %q: %+v, want %+v", tc.use, tc.typ, got, tc.want)
		}
	}
	if !c.Stored(catalogue.TestType) || c.Publishable(catalogue.TestType) || c.Subscribable(catalogue.TestType) {
		t.Error("ping.test is stored, never published or subscribed to")
	}
	if got := c.Entries(); len(got) != 8 || got[7].Name != catalogue.TestType || got[0].Name != "payout.paid" ||
		got[2].Name != catalogue.EndpointDisabled {
		t.Errorf("Entries has %d entries, want the vocabulary's, the 5 operational types, then ping.test", len(got))
	}
}

func TestValidateRefusesAnEmptyOrReservedVocabulary(t *testing.T) {
	if err := catalogue.New(catalogue.Names()).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := catalogue.New(nil).Validate(); err == nil {
		t.Error("an empty vocabulary passed")
	}
	if err := catalogue.New([]string{"payout.paid", catalogue.TestType}).Validate(); err == nil ||
		err.Error() != "ping.test is reserved for send_test_event" {
		t.Errorf("a vocabulary with ping.test: %v", err)
	}
	// Names is a copy: a caller cannot change the catalogue.
	c := catalogue.New([]string{"payout.paid"})
	c.Names()[0] = catalogue.TestType
	if !c.Publishable("payout.paid") {
		t.Error("changing Names changed the catalogue")
	}
}

// The operational types are webhookd's own: every deployment lists them,
// merchants subscribe to them, producers can neither publish nor trigger
// them, and no vocabulary may hold them.
func TestOperationalTypesAreSubscribableNotPublishable(t *testing.T) {
	c := catalogue.New([]string{"payout.paid"})
	want := []string{"webhook_endpoint.disabled", "webhook_endpoint.enabled", "webhook_delivery.exhausted",
		"webhook_endpoint.certificate_expiring", "webhook_endpoint.token_failing"}
	var got []string
	for _, et := range catalogue.Operational() {
		got = append(got, et.Name)
		if len(et.Schema) == 0 || !et.Subscribable || !strings.HasSuffix(et.Description, ".") {
			t.Errorf("%s: entry %s", et.Name, et.Description)
		}
		if !strings.Contains(string(et.Schema), `"subscription_id":{"description"`) {
			t.Errorf("%s: subscription_id did not take its shared definition: %s", et.Name, et.Schema)
		}
		if !c.Subscribable(et.Name) || c.Publishable(et.Name) || !c.Stored(et.Name) {
			t.Errorf("%s: subscribable and stored, never published", et.Name)
		}
		if bad := c.CheckPublish("type", et.Name); bad == nil || bad.Rule != catalogue.RuleTypeOperational {
			t.Errorf("%s: publish refusal %+v", et.Name, bad)
		}
		if bad := c.CheckTrigger("type", et.Name); bad == nil || bad.Rule != catalogue.RuleTypeOperational {
			t.Errorf("%s: trigger refusal %+v", et.Name, bad)
		}
		if c.CheckSubscribe("events", et.Name) != nil {
			t.Errorf("%s: not subscribable", et.Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Operational() = %v, want %v", got, want)
	}
	if catalogue.New([]string{"payout.paid", catalogue.DeliveryExhausted}).Validate() == nil {
		t.Error("a vocabulary holding an operational type passed")
	}
	if string(c.Example(catalogue.EndpointEnabled)) == "{}" {
		t.Error("an operational type's example is the generic one")
	}
}
