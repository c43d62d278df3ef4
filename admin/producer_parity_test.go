package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/admin"
	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/producer"
	"github.com/webhookd/webhookd/retry"
	"github.com/webhookd/webhookd/signer"
)

// TestProducerRefusesAsHTTPIngest publishes the same bad events through
// HTTP ingest and through the producer package (made with NewFromURL from
// the engine's Redis URL), with a worker running, and checks that each is
// refused on both paths for the same field, rule and message: by the
// producer's Publish itself when it cannot build a task, else by the
// worker, as Refusal reads it.
func TestProducerRefusesAsHTTPIngest(t *testing.T) {
	t.Parallel()
	var d *dispatcher.Dispatcher
	h := newHarness(t, func(cfg *admin.Config) {
		sealer, err := signer.NewSealer(cfg.MasterKey)
		if err != nil {
			t.Fatal(err)
		}
		opt := cfg.Redis.(*redis.Client).Options()
		d, err = dispatcher.New(dispatcher.Config{
			Store: cfg.Store, Redis: asynq.RedisClientOpt{Network: opt.Network, Addr: opt.Addr},
			Schedule: retry.Schedule{Delays: []time.Duration{time.Second}}, Sealer: sealer,
			DefaultAPIVersion: admin.DefaultVersion, EventTypes: cfg.EventTypes, MaxPayloadBytes: 1024,
			VersionUsable: cfg.Versions.Usable,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		usePipeline(cfg, d)
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	p, err := producer.NewFromURL("unix://" + h.redis.Options().Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })

	// Each case is an ingest body; {id} stands for a fresh event id.
	cases := []struct{ name, body string }{
		{"an unknown type", `{"id":"{id}","merchant_id":"m1","type":"payout.lost","payload":{}}`},
		{"the reserved ping.test", `{"id":"{id}","merchant_id":"m1","type":"ping.test","payload":{}}`},
		{"no type", `{"id":"{id}","merchant_id":"m1","payload":{}}`},
		{"no merchant", `{"id":"{id}","type":"payout.paid","payload":{}}`},
		{"a NUL in the merchant id", `{"id":"{id}","merchant_id":"m\u0000","type":"payout.paid","payload":{}}`},
		{"a NUL in the type", `{"id":"{id}","merchant_id":"m1","type":"payout.paid\u0000","payload":{}}`},
		{"a NUL in the api_version", `{"id":"{id}","merchant_id":"m1","type":"payout.paid","payload":{},"api_version":"\u0000"}`},
		{"a NUL deep in the payload", `{"id":"{id}","merchant_id":"m1","type":"payout.paid","payload":{"a":[{"b":"x\u0000"}]}}`},
		{"a NUL in a payload key", `{"id":"{id}","merchant_id":"m1","type":"payout.paid","payload":{"a":{"\u0000":1}}}`},
		{"invalid UTF-8 in the payload", "{\"id\":\"{id}\",\"merchant_id\":\"m1\",\"type\":\"payout.paid\",\"payload\":{\"a\":\"\xff\"}}"},
		{"a lone surrogate in the payload", `{"id":"{id}","merchant_id":"m1","type":"payout.paid","payload":{"a":"\ud800"}}`},
		{"an array payload", `{"id":"{id}","merchant_id":"m1","type":"payout.paid","payload":[1]}`},
		{"a null payload", `{"id":"{id}","merchant_id":"m1","type":"payout.paid","payload":null}`},
		{"no payload", `{"id":"{id}","merchant_id":"m1","type":"payout.paid"}`},
		{"a payload over the limit", `{"id":"{id}","merchant_id":"m1","type":"payout.paid","payload":{"memo":"` + strings.Repeat("a", 1100) + `"}}`},
		{"an unusable api_version", `{"id":"{id}","merchant_id":"m1","type":"payout.paid","payload":{},"api_version":"1999-01-01"}`},
		{"an id not a UUID", `{"id":"po_1","merchant_id":"m1","type":"payout.paid","payload":{}}`},
		{"an id in braces", `{"id":"{` + uuid.NewString() + `}","merchant_id":"m1","type":"payout.paid","payload":{}}`},
		{"an id without dashes", `{"id":"` + strings.ReplaceAll(uuid.NewString(), "-", "") + `","merchant_id":"m1","type":"payout.paid","payload":{}}`},
		{"a deliver_at in the past", `{"id":"{id}","merchant_id":"m1","type":"payout.paid","payload":{},"deliver_at":"2020-01-01T00:00:00Z"}`},
		{"a deliver_at too far", `{"id":"{id}","merchant_id":"m1","type":"payout.paid","payload":{},"deliver_at":"` +
			time.Now().Add(31*24*time.Hour).UTC().Format(time.RFC3339) + `"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.ReplaceAll(tc.body, `"{id}"`, `"`+uuid.NewString()+`"`)
			r := h.doInternal(request{Method: http.MethodPost, Path: "/internal/v1/events", Body: body})
			if r.Status < 400 || r.Status >= 500 {
				t.Fatalf("HTTP ingest: %d %s, want a refusal", r.Status, r.Body)
			}
			httpErr := r.JSON(t)
			var e producer.Event
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatal(err)
			}
			refused := publishRefused(t, p, e)
			wantRule := map[string]string{"parameter_missing": "missing", "payload_too_large": "too_large"}[httpErr["code"].(string)]
			if refused.Param != httpErr["param"] || refused.Message != httpErr["message"] ||
				wantRule != "" && refused.Rule != wantRule || wantRule == "" && httpErr["code"] != "parameter_invalid" {
				t.Errorf("the producer's refusal %+v; HTTP ingest's %d %s", *refused, r.Status, r.Body)
			}
		})
	}
}

// publishRefused publishes e with the producer and returns its refusal:
// Publish's own error, or the one the worker keeps.
func publishRefused(t *testing.T, p *producer.Producer, e producer.Event) *producer.Refused {
	t.Helper()
	ctx := context.Background()
	err := p.Publish(ctx, e)
	var refused *producer.Refused
	if errors.As(err, &refused) {
		return refused
	}
	if err != nil {
		t.Fatalf("Publish: %v, neither accepted nor a *producer.Refused", err)
	}
	if !eventually(10*time.Second, func() bool {
		refused, err = p.Refusal(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		return refused != nil
	}) {
		t.Fatalf("the worker kept no refusal of %s within 10s", e.ID)
	}
	return refused
}
