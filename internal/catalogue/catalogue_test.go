package catalogue_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/catalogue"
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
	page, err := os.ReadFile("../docs/events.md")
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
