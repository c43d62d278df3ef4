package poll_test

import (
	"testing"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/dispatcher/poll"
	"github.com/webhookd/webhookd/internal/destination/desttest"
	pollkind "github.com/webhookd/webhookd/internal/destination/poll"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/signer"
)

// TestPollConformance runs the conformance suite on the poll kind, which
// is never sent to: an event published to a poll subscription is read
// by the Poller as the merchant's GET …/poll reads it, and what the read
// gives (body and Standard Webhooks values) verifies with package
// receiver under the subscription's secret.
func TestPollConformance(t *testing.T) {
	t.Parallel()
	desttest.Run(t, desttest.Case{
		Kind: pollkind.New(),
		Fetched: func(t testing.TB) (string, desttest.Arrived) {
			e := dispatchertest.New(t.(*testing.T))
			sub, secret := subscribePollSigned(e, "m1")
			d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.MasterKey = make([]byte, 32) })
			e.Publish(d, "m1", "payout.paid")
			page, err := d.Poller.Poll(t.Context(), "m1", sub.ID, poll.Request{})
			if err != nil || len(page.Items) != 1 {
				t.Fatalf("poll: %d items, %v; want the one published", len(page.Items), err)
			}
			s := page.Items[0].Signed
			return secret, desttest.Arrived{Body: s.Body, Headers: map[string]string{
				signer.HeaderID: s.ID, signer.HeaderTimestamp: s.Timestamp, signer.HeaderSignature: s.Signature}}
		},
		NotApplicable: map[string]string{
			"target down, then back": "nothing is sent, so no target is ever down: a read that fails is the merchant's to " +
				"make again, and a delivery stays in the line until a read moves past it (TestPollReadSignsOnce)",
			"wrong credentials": "the engine holds no credential of a target: the merchant's read proves its API key " +
				"(admin's poll tests)",
			"ordered": "the line is read in the order it was written, whatever the ordering key (TestPollReadSignsOnce " +
				"reads the same items in the same order)",
			"answer past the read bound": "nothing answers: a read is bounded by its limit and by MaxCostlySignings " +
				"(TestPollCostlySigningsBoundedPerRead)",
			"closed publisher sends nothing": "the kind has no publisher the worker uses: a poll delivery is never attempted " +
				"(TestPollSubscriptionIsNeverDialled), and a send asked of it fails destination_invalid (internal/destination's " +
				"TestForChoosesTheKind)",
		},
	})
}
