package transform_test

import (
	"encoding/json"
	"testing"

	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/transform"
)

// slack10 is a 10-line transformation: a payout event made a Slack
// message.
const slack10 = `function handler(webhook) {
  const p = webhook.payload;
  const amount = p.amount + ' ' + p.currency;
  webhook.payload = {
    text: webhook.event_type + ': ' + amount,
    blocks: [{type: 'section', text: {type: 'mrkdwn', text: '*' + p.reference + '* ' + amount}}],
  };
  webhook.headers['X-Slack-Channel'] = p.metadata.order_id ? 'orders' : 'payouts';
  return webhook;
}`

// BenchmarkRun10Lines is one delivery's transformation: a fresh engine,
// the 10 lines run on a catalogue payout.
func BenchmarkRun10Lines(b *testing.B) {
	s := sandbox(b, transform.Limits{})
	p, err := s.Compile(b.Context(), slack10)
	if err != nil {
		b.Fatal(err)
	}
	in := transform.Input{EventType: "payout.paid", Payload: example(b, "payout.paid"), URL: "https://hooks.example/in",
		Headers: map[string]string{}}
	var cpu int64
	b.ReportAllocs()
	for b.Loop() {
		out, err := s.Run(b.Context(), p, in)
		if err != nil {
			b.Fatal(err)
		}
		cpu += int64(out.CPUTime)
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}

func example(b *testing.B, name string) json.RawMessage {
	for _, et := range catalogue.Default() {
		if et.Name == name {
			return et.Example
		}
	}
	b.Fatalf("no %s in the catalogue", name)
	return nil
}
