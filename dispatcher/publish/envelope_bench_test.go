package publish

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// benchPayload is a producer's payload of about size bytes, formatted with
// indentation so that compaction has work to do, as it has for most
// producers' pretty-printed JSON.
func benchPayload(size int) json.RawMessage {
	head := "{\n  \"id\": \"po_0195d1f4\",\n  \"status\": \"paid\",\n  \"amount\": \"1250.00\",\n  \"reference\": \""
	const tail = "\"\n}"
	return json.RawMessage(head + strings.Repeat("x", max(size-len(head)-len(tail), 0)) + tail)
}

// BenchmarkEnvelope measures what newEvent spends on the bytes of one event:
// compacting the producer's payload and encoding the envelope around it.
// It runs once per published event, not per delivery.
func BenchmarkEnvelope(b *testing.B) {
	id := uuid.MustParse("0195d1f4-9c1e-7c55-a1f2-3b4c5d6e7f80")
	at := time.Date(2026, 5, 1, 12, 0, 0, 123e6, time.UTC)
	for _, size := range []int{256, 1024, 16 * 1024} {
		payload := benchPayload(size)
		b.Run(byteSize(size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				compact, err := compactObject(payload)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := envelopeOf(id, "payout.paid", "2026-05-01", compact, at); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidPayload measures the payload's JSON check of every
// publish (Check), against encoding/json's json.Valid it replaced.
func BenchmarkValidPayload(b *testing.B) {
	for _, size := range []int{1024, 16 * 1024} {
		payload := benchPayload(size)
		for _, c := range []struct {
			name  string
			valid func([]byte) bool
		}{{"validJSON", validJSON}, {"json.Valid", json.Valid}} {
			b.Run(byteSize(size)+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(payload)))
				for b.Loop() {
					if !c.valid(payload) {
						b.Fatal("refused")
					}
				}
			})
		}
	}
}

// BenchmarkEventID measures the UUIDv7 made for an event without a
// producer-supplied id.
func BenchmarkEventID(b *testing.B) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := uuidV7At(at); err != nil {
			b.Fatal(err)
		}
	}
}

func byteSize(n int) string {
	if n >= 1024 {
		return strconv.Itoa(n/1024) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
