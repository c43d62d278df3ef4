package main

import (
	"encoding/json"
	"testing"
)

// TestPayoutPayload checks single's payload: the catalogue's payout.paid
// example, unique per event, filled to the size asked for with varied
// metadata.
func TestPayoutPayload(t *testing.T) {
	if a, b := payoutPayload("run", 7, 1024), payoutPayload("run", 8, 1024); string(a[len(a)-300:]) == string(b[len(b)-300:]) {
		t.Error("two events' metadata are the same")
	}
	for _, size := range []int{1024, 2000, 1500, 10} {
		p := payoutPayload("run", 7, size)
		var v struct {
			Type, Status, Reference string
			Metadata                map[string]string
		}
		if err := json.Unmarshal(p, &v); err != nil {
			t.Fatalf("size %d: %s: %v", size, p, err)
		}
		if v.Type != "payout" || v.Status != "paid" || v.Reference != "Invoice run-7" || v.Metadata["order_id"] != "A-7" {
			t.Errorf("size %d: %+v", size, v)
		}
		if size >= 1024 && len(p) != size {
			t.Errorf("size %d: %d bytes", size, len(p))
		}
		if size < 1024 && len(v.Metadata) != 2 {
			t.Errorf("size %d: filled below the example's own size: %d bytes", size, len(p))
		}
		if size >= 1024 && (v.Metadata["invoice_0"] == "" || v.Metadata["customer_1"] == "") {
			t.Errorf("size %d: metadata %v, want invoices and customers", size, v.Metadata)
		}
	}
}
