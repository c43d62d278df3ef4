package deliver

import (
	"testing"

	"github.com/webhookd/webhookd/internal/store"
)

// TestThinBody: the thin form keeps the envelope's fields byte for byte,
// in order, with data in place of the payload; a full subscription's body
// is the stored one, untouched.
func TestThinBody(t *testing.T) {
	t.Parallel()
	stored := []byte(`{"id":"0193a5e0-7f3c-7d1e-9c2b-5a4f3e2d1c0b","type":"payout.paid","api_version":"2026-05-01",` +
		`"payload":{"id":"po_<1>","type":"payout","amount":"12.00"},"date":"2026-11-23T09:14:05.123Z"}`)
	tests := []struct {
		style string
		want  string
	}{
		{store.PayloadFull, string(stored)},
		{"", string(stored)},
		{store.PayloadThin, `{"id":"0193a5e0-7f3c-7d1e-9c2b-5a4f3e2d1c0b","type":"payout.paid","api_version":"2026-05-01",` +
			`"data":{"object_id":"po_<1>","object_type":"payout"},"date":"2026-11-23T09:14:05.123Z"}`},
	}
	for _, tt := range tests {
		got, err := BodyFor(store.LeasedDelivery{Body: stored, PayloadStyle: tt.style})
		if err != nil || string(got) != tt.want {
			t.Errorf("%q: %s, %v\nwant %s", tt.style, got, err, tt.want)
		}
	}
}
