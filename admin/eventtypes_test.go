package admin_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/webhookd/webhookd/internal/catalogue"
)

// GET /v1/event_types lists the configured catalogue in order, each with
// a description and a JSON example, then ping.test, the one type no
// subscription may name.
func TestEventTypesListsTheCatalogueThenPing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m_types")
	r := h.do(request{Method: http.MethodGet, Path: "/v1/event_types", Key: key})
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/event_types: %d %s", r.Status, r.Body)
	}
	var got struct {
		Data []struct {
			Name         string          `json:"name"`
			Description  string          `json:"description"`
			Example      json.RawMessage `json:"example"`
			Subscribable bool            `json:"subscribable"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, et := range got.Data {
		names = append(names, et.Name)
		var example map[string]any
		if et.Description == "" || json.Unmarshal(et.Example, &example) != nil {
			t.Errorf("%s: description %q, example %s", et.Name, et.Description, et.Example)
		}
		if et.Subscribable != (et.Name != "ping.test") {
			t.Errorf("%s: subscribable = %t", et.Name, et.Subscribable)
		}
	}
	want := slices.Clone(h.cfg.EventTypes)
	for _, et := range catalogue.Operational() {
		want = append(want, et.Name)
	}
	want = append(want, "ping.test")
	if !slices.Equal(names, want) {
		t.Fatalf("names = %v, want %v", names, want)
	}
	if paid := got.Data[slices.Index(names, "payout.paid")]; string(paid.Example) != string(catalogue.For([]string{"payout.paid"})[0].Example) {
		t.Errorf("payout.paid example = %s, want the catalogue's", paid.Example)
	}
}
