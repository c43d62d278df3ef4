package admin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDecodeIngestBatch is the strict decoding of a batch of 100
// events with 1 KiB payloads (the bench's throughput batches): decodeBody,
// the one pass the ingest endpoints take, and encoding/json alone.
func BenchmarkDecodeIngestBatch(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"events":[`)
	for i := range 100 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":"01a20275-5ad1-715b-9338-a531418d%04d","merchant_id":"m_1","type":"payout.paid","payload":{"id":"po_%d","pad":"%s"}}`,
			i, i, strings.Repeat("x", 1000))
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	type batch = ingestBatchRequest
	b.Run("strict", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var v batch
			if err := decodeBody(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one pass", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var v batch
			if err := decodeOnePass(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var v batch
			if err := json.Unmarshal(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
