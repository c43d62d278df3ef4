package subscriptions_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/invalid"
	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/internal/testfixtures/kindstest"
)

// TestSQSEngineCredentials: an sqs destination without an access key is
// refused unless the operator allows the engine's credentials for its
// queue; allowed, it reads as "credentials": "engine" and stores no key;
// a key given is always the one stored and shown.
func TestSQSEngineCredentials(t *testing.T) {
	t.Parallel()
	const prefix = "https://sqs.eu-west-1.amazonaws.com/123456789012/"
	off, st := registry(t, subscriptions.Rules{EventTypes: catalogue()}, "m1")
	on := subscriptions.NewRegistry(st.Subscriptions, st.Listeners, masterKey(), subscriptions.Rules{EventTypes: catalogue(),
		Kinds: kindstest.Registry(t, []string{prefix, "https://sqs.us-east-1.amazonaws.com/210987654321/"})})
	const key = `,"access_key_id":"AKIAMERCHANT","secret_access_key":"merchant-secret-key"`
	sqs := func(queueURL, extra string) string {
		return `{"type":"sqs","queue_url":"` + queueURL + `","region":"eu-west-1"` + extra + `}`
	}
	for _, tc := range []struct {
		name      string
		reg       *subscriptions.Registry
		dest      string
		param     string // "" accepted
		rule      string // the fault's rule, when param is set
		engine    bool   // accepted with the engine's credentials
		wantStore string // the access key stored, when accepted
	}{
		{"off: key required", off, sqs(prefix+"payouts", ""), "destination.access_key_id", invalid.RuleMissing, false, ""},
		{"off: key given", off, sqs(prefix+"payouts", key), "", "", false, "AKIAMERCHANT"},
		{"on: under a listed prefix", on, sqs(prefix+"payouts", ""), "", "", true, ""},
		{"on: FIFO queue under the second prefix", on, sqs("https://sqs.us-east-1.amazonaws.com/210987654321/payouts.fifo", ""), "", "", true, ""},
		{"on: another account", on, sqs("https://sqs.eu-west-1.amazonaws.com/999999999999/payouts", ""),
			"destination.access_key_id", "destination_engine_credentials_refused", false, ""},
		{"on: an account that starts the same", on, sqs("https://sqs.eu-west-1.amazonaws.com/1234567890123/payouts", ""),
			"destination.access_key_id", "destination_engine_credentials_refused", false, ""},
		{"on: a path climbing out of the prefix", on, sqs(prefix+"../999999999999/payouts", ""),
			"destination.access_key_id", "destination_engine_credentials_refused", false, ""},
		{"on: a query after the queue", on, sqs(prefix+"payouts?QueueUrl=x", ""),
			"destination.access_key_id", "destination_engine_credentials_refused", false, ""},
		{"on: an endpoint of the merchant's", on, sqs(prefix+"payouts", `,"endpoint":"https://sqs.example.com"`),
			"destination.access_key_id", "destination_engine_credentials_refused", false, ""},
		{"on: the queue's own origin as endpoint", on, sqs(prefix+"payouts", `,"endpoint":"https://sqs.eu-west-1.amazonaws.com"`), "", "", true, ""},
		{"on: key given under a listed prefix is used", on, sqs(prefix+"payouts", key), "", "", false, "AKIAMERCHANT"},
		{"on: key given elsewhere", on, sqs("https://sqs.eu-west-1.amazonaws.com/999999999999/payouts", key), "", "", false, "AKIAMERCHANT"},
		{"on: half a key", on, sqs(prefix+"payouts", `,"access_key_id":"AKIAMERCHANT"`), "destination.secret_access_key", invalid.RuleMissing, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, _, err := tc.reg.Create(context.Background(), "m1", subscriptions.Draft{Events: []string{"*"}, Destination: json.RawMessage(tc.dest)})
			if tc.param != "" {
				e := invalid.As(err)
				if e == nil || e.Param != tc.param || e.Rule != tc.rule {
					t.Fatalf("Create = %#v, want a fault of %s (%s)", e, tc.param, tc.rule)
				}
				if !strings.Contains(e.Message, tc.param) || strings.Contains(e.Message, "123456789012") {
					t.Errorf("message %q: want it to say what to give, and never the listed prefixes", e.Message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			summary := sub.Destination.Summary
			shown, _ := json.Marshal(summary)
			if tc.engine != (summary["credentials"] == "engine") {
				t.Errorf("summary %s: engine credentials %v, want %v", shown, summary["credentials"], tc.engine)
			}
			if _, hasKey := summary["access_key_id"]; hasKey == tc.engine || strings.Contains(string(shown), "merchant-secret-key") {
				t.Errorf("summary %s: want the key id shown only when given, and never the secret", shown)
			}
			if got, _ := stored(t, sub.Destination.Sealed)["access_key_id"].(string); got != tc.wantStore {
				t.Errorf("stored access key %q, want %q", got, tc.wantStore)
			}
		})
	}
}
