// Package catalogue describes the event types webhookd delivers: what each
// one means and an example of its payload. The portal's event catalogue,
// GET /v1/event_types and `webhookd trigger` all read it, so a merchant sees
// one description and one example wherever they look.
package catalogue

import (
	"encoding/json"
	"slices"
)

// EventType is one entry of the catalogue.
type EventType struct {
	// Name is the type as it appears in an envelope, e.g. "payout.paid".
	Name string `json:"name"`
	// Description says when the event fires.
	Description string `json:"description"`
	// Example is a payload of this type, as the envelope's data carries it.
	Example json.RawMessage `json:"example"`
}

// payout is the example payout snapshot the payout and return events share,
// with the fields of the payout resource (spec 2.1); status is set per type.
func payout(status string, failure string) json.RawMessage {
	p := map[string]any{
		"id":                                  "0f2d8c1e-6a4b-4e55-9b0f-3c8a1d2e4f60",
		"type":                                "payout",
		"status":                              status,
		"account_id":                          "7b1e2c3d-4f5a-4b6c-8d7e-9f0a1b2c3d4e",
		"amount":                              "1250.00",
		"currency":                            "EUR",
		"counterparty_id":                     "c3a9e1f2-5b6d-4c7e-8f9a-0b1c2d3e4f5a",
		"unstructured_remittance_information": "Invoice 2026-1142",
		"tracking_reference":                  "a7f3c2e1-9b8d-4e6f-a5c4-3b2a1d0e9f8c",
		"failure":                             nil,
		"metadata":                            map[string]string{"order_id": "ord_8812"},
		"initiated_at":                        "2026-11-23T09:14:02Z",
		"sent_at":                             "2026-11-23T09:14:05Z",
		"tx_hash":                             nil,
		"rail":                                "sepa",
	}
	if failure != "" {
		p["failure"] = map[string]any{"code": failure, "message": "The destination account is closed.", "retry": false}
	}
	b, _ := json.Marshal(p) // a map of JSON values always marshals
	return b
}

// object marshals an example payload.
func object(v map[string]any) json.RawMessage {
	b, _ := json.Marshal(v) // a map of JSON values always marshals
	return b
}

// Default returns the catalogue of spec 6.1, in its order. ping.test, the
// synthetic event of send_test_event, is not in it: merchants cannot
// publish or subscribe to it by name.
func Default() []EventType {
	deposit := object(map[string]any{
		"id": "5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f", "type": "deposit", "account_id": "7b1e2c3d-4f5a-4b6c-8d7e-9f0a1b2c3d4e",
		"amount": "980.40", "currency": "GBP", "rail": "faster_payments", "reference": "Rent November",
		"received_at": "2026-11-23T08:02:11Z", "metadata": map[string]string{},
	})
	conversion := func(status string) json.RawMessage {
		return object(map[string]any{
			"id": "9e8d7c6b-5a4f-4e3d-9c2b-1a0f9e8d7c6b", "type": "conversion", "status": status,
			"source_account_id": "7b1e2c3d-4f5a-4b6c-8d7e-9f0a1b2c3d4e", "target_account_id": "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
			"source_amount": "1000.00", "source_currency": "EUR", "target_amount": "1084.20", "target_currency": "USD",
			"rate": "1.0842", "created_at": "2026-11-23T10:00:00Z", "metadata": map[string]string{},
		})
	}
	return []EventType{
		{"payout.created", "A payout is created and queued.", payout("initiated", "")},
		{"payout.initiated", "The payout was sent to the payment rail.", payout("submitted", "")},
		{"payout.paid", "The payout settled at the destination.", payout("sent", "")},
		{"payout.failed", "The payout could not be completed; payload.failure holds the details.", payout("failed", "account_closed")},
		{"return.initiated", "A return of a previous deposit is queued.", payout("initiated", "")},
		{"return.paid", "The return settled at the destination.", payout("sent", "")},
		{"return.failed", "The return could not be completed.", payout("failed", "account_closed")},
		{"return.returned", "A paid return was reversed and the funds were credited back.", payout("returned", "")},
		{"deposit.received", "An incoming transfer was credited to an account.", deposit},
		{"conversion.created", "A currency conversion is queued.", conversion("created")},
		{"conversion.succeeded", "The conversion completed and the funds are available in the target account.", conversion("succeeded")},
		{"conversion.failed", "The conversion could not be completed.", conversion("failed")},
	}
}

// Names returns the names of Default, in order.
func Names() []string {
	var names []string
	for _, t := range Default() {
		names = append(names, t.Name)
	}
	return names
}

// For returns the entries of the given types, in the order given: those
// of Default as they are, and a type the operator added
// (WEBHOOKD_EVENT_TYPES) with a generic description and an empty example.
func For(names []string) []EventType {
	known := Default()
	out := make([]EventType, 0, len(names))
	for _, n := range names {
		i := slices.IndexFunc(known, func(t EventType) bool { return t.Name == n })
		if i >= 0 {
			out = append(out, known[i])
			continue
		}
		out = append(out, EventType{Name: n, Description: "An event type this deployment adds to the standard catalogue.",
			Example: json.RawMessage(`{}`)})
	}
	return out
}
