package subscriptions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/store"
)

// Bounds of a batch.
const (
	// MaxBatchSize is the most deliveries one request may carry.
	MaxBatchSize = 100
	// MaxBatchWaitMS is the longest a batch may wait to fill, in
	// milliseconds.
	MaxBatchWaitMS = 10000
)

// CheckPayloadStyle checks a payload style: "full" or "thin".
func CheckPayloadStyle(param, style string) error {
	if style != store.PayloadFull && style != store.PayloadThin {
		return invalid.Value(param, "payload_style_unknown", param+` must be "full" or "thin".`)
	}
	return nil
}

// BatchNames are the names of a batch's two fields on one surface:
// max_size and max_wait_ms on /v1, maxSize and maxWaitMs on the legacy
// routes.
type BatchNames struct {
	MaxSize, MaxWait string
}

// ParseBatch reads a batch as the API takes it: null for none, or
// {"max_size": 1–100, "max_wait_ms": 0–10000} (max_wait_ms defaults to 0:
// whatever is due when a request can go, without waiting). A bad value is
// refused under param.name, as in batch.max_size.
func ParseBatch(param string, names BatchNames, raw json.RawMessage) (*store.Batch, error) {
	obj, err := objectMembers(param, "batch", raw, fmt.Sprintf(
		`%s must be an object {"%s": 1–%d, "%s": 0–%d}, or null for one delivery per request.`,
		param, names.MaxSize, MaxBatchSize, names.MaxWait, MaxBatchWaitMS), names.MaxSize, names.MaxWait)
	if err != nil || obj == nil {
		return nil, err
	}
	size, err := batchInt(param+"."+names.MaxSize, obj[names.MaxSize], 1, MaxBatchSize, "deliveries per request")
	if err != nil {
		return nil, err
	}
	if size == nil {
		return nil, invalid.Missing(param + "." + names.MaxSize)
	}
	wait, err := batchInt(param+"."+names.MaxWait, obj[names.MaxWait], 0, MaxBatchWaitMS, "milliseconds")
	if err != nil {
		return nil, err
	}
	b := &store.Batch{MaxSize: *size}
	if wait != nil {
		b.MaxWaitMS = *wait
	}
	return b, nil
}

// batchInt reads one field of a batch: absent (or null) is nil, else an
// integer from lo to hi.
func batchInt(param string, raw json.RawMessage, lo, hi int, unit string) (*int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var v int
	if err := json.Unmarshal(raw, &v); err != nil || v < lo || v > hi {
		return nil, invalid.Value(param, "batch_range", fmt.Sprintf("%s must be an integer from %d to %d (%s).", param, lo, hi, unit))
	}
	return &v, nil
}

// BatchView is how the API shows a batch: null, or its two fields under
// the surface's names.
func BatchView(names BatchNames, b *store.Batch) map[string]int {
	if b == nil {
		return nil
	}
	return map[string]int{names.MaxSize: b.MaxSize, names.MaxWait: b.MaxWaitMS}
}

// objectMembers reads raw, a JSON object of the API named param, by
// allow-list: its members, each one of allowed; nil for null. Not an
// object is refused as rule+"_invalid" in the words of notObject, a
// member not allowed as rule+"_field_unknown", naming it.
func objectMembers(param, rule string, raw json.RawMessage, notObject string, allowed ...string) (map[string]json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if bytes.Equal(trimmed, []byte("null")) {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil || obj == nil {
		return nil, invalid.Value(param, rule+"_invalid", notObject)
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !slices.Contains(allowed, k) {
			return nil, invalid.Value(param, rule+"_field_unknown", param+" has no field "+invalid.Quote(k)+".")
		}
	}
	return obj, nil
}
