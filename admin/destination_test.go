package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/admin"
)

// TestDestination: a subscription takes a broker destination instead of a
// url, shows it with its credentials masked and its target as url, and
// goes back to an HTTP endpoint with a url.
func TestDestination(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: map[string]any{
		"events": []string{"*"}, "destination": map[string]any{"type": "rabbitmq",
			"url": "amqps://shop:s3cr3t-password@broker.example.com/prod", "exchange": "webhooks", "routing_key": "payouts"}}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	if strings.Contains(string(r.Body), "s3cr3t") {
		t.Fatalf("create shows the password: %s", r.Body)
	}
	sub := decode[struct {
		ID          string         `json:"id"`
		URL         string         `json:"url"`
		Destination map[string]any `json:"destination"`
	}](t, r)
	if sub.URL != "amqps://shop:xxxxx@broker.example.com/prod" || sub.Destination["type"] != "rabbitmq" ||
		sub.Destination["exchange"] != "webhooks" || sub.Destination["routing_key"] != "payouts" {
		t.Fatalf("create shows %s", r.Body)
	}
	r = h.do(request{Method: http.MethodGet, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key})
	if r.Status != http.StatusOK || strings.Contains(string(r.Body), "s3cr3t") || !strings.Contains(string(r.Body), `"routing_key":"payouts"`) {
		t.Fatalf("read: %d %s", r.Status, r.Body)
	}
	// A url alone is refused, naming url: the subscription's url is its
	// destination's target, and taking it would change nothing.
	r = h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
		Body: map[string]any{"url": "https://example.com/h"}})
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `"param":"url"`) {
		t.Fatalf("update of url alone: %d %s", r.Status, r.Body)
	}
	// Back to an HTTP endpoint: the destination null and a url.
	r = h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + sub.ID, Key: key,
		Body: map[string]any{"url": "https://example.com/h", "destination": nil}})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"destination":null`) ||
		!strings.Contains(string(r.Body), `"url":"https://example.com/h"`) {
		t.Fatalf("update back to HTTP: %d %s", r.Status, r.Body)
	}

	// The legacy surface, camelCase both ways.
	r = h.legacy("create", key, "", map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "sqs",
		"queueUrl": "https://sqs.eu-west-1.amazonaws.com/123456789012/webhooks", "region": "eu-west-1",
		"accessKeyId": "AKIAEXAMPLE", "secretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"queueUrl":"https://sqs.eu-west-1.amazonaws.com/123456789012/webhooks"`) ||
		strings.Contains(string(r.Body), "bPxRfiCYEXAMPLEKEY") {
		t.Fatalf("legacy create: %d %s", r.Status, r.Body)
	}
	// There, a field is named in camelCase alone: the snake_case spelling
	// is no field of the surface's document.
	r = h.legacy("create", key, "", map[string]any{"events": []string{"*"}, "destination": map[string]any{"type": "sqs",
		"queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/webhooks", "region": "eu-west-1",
		"accessKeyId": "AKIAEXAMPLE", "secretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}})
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "queueUrl") {
		t.Fatalf("legacy create with queue_url: %d %s, want 400 naming queueUrl", r.Status, r.Body)
	}
}

// TestDestinationRefused: each fault names its field.
func TestDestinationRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *admin.Config) { c.Destinations = []string{"webhook", "rabbitmq"} })
	key := h.merchant("m1")
	rabbit := map[string]any{"type": "rabbitmq", "url": "amqp://u:p@broker.example.com/", "routing_key": "q"}
	for _, tc := range []struct {
		name  string
		body  map[string]any
		param string
		code  string
	}{
		{"url beside a destination", map[string]any{"url": "https://example.com/h", "destination": rabbit}, "url", "parameter_invalid"},
		{"a batch to a broker", map[string]any{"destination": rabbit, "batch": map[string]any{"max_size": 10}}, "batch", "parameter_invalid"},
		{"no url, no destination", map[string]any{}, "url", "parameter_missing"},
		{"not an object", map[string]any{"destination": "rabbitmq"}, "destination", "parameter_invalid"},
		{"no type", map[string]any{"destination": map[string]any{"url": "amqp://b.example.com"}}, "destination.type", "parameter_missing"},
		{"unknown type", map[string]any{"destination": map[string]any{"type": "smtp"}}, "destination.type", "parameter_invalid"},
		{"type turned off", map[string]any{"destination": map[string]any{"type": "kafka", "brokers": []string{"k.example.com:9092"}, "topic": "t"}},
			"destination.type", "parameter_invalid"},
		{"field of another type", map[string]any{"destination": map[string]any{"type": "rabbitmq", "topic": "t"}}, "destination.topic", "parameter_invalid"},
		{"no rabbitmq url", map[string]any{"destination": map[string]any{"type": "rabbitmq", "routing_key": "q"}}, "destination.url", "parameter_missing"},
		{"http url", map[string]any{"destination": map[string]any{"type": "rabbitmq", "url": "http://b.example.com", "routing_key": "q"}}, "destination.url", "parameter_invalid"},
		{"default exchange without a routing key", map[string]any{"destination": map[string]any{"type": "rabbitmq", "url": "amqp://b.example.com"}},
			"destination.routing_key", "parameter_missing"},
		{"exchange not a string", map[string]any{"destination": map[string]any{"type": "rabbitmq", "url": "amqp://b.example.com", "exchange": 3}},
			"destination.exchange", "parameter_invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := h.with(t)
			body := map[string]any{"events": []string{"*"}}
			for k, v := range tc.body {
				body[k] = v
			}
			r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: body})
			m := expectError(t, r, http.StatusBadRequest, tc.code)
			if m["param"] != tc.param {
				t.Fatalf("param %v, want %s (%v)", m["param"], tc.param, m["message"])
			}
		})
	}
}

// TestDestinationBatchRefusedOnUpdate: an update may not give a batch to a
// subscription with a destination, whether it has one already or is given
// one by the same update, as a create with both is refused; an HTTP
// endpoint takes one.
func TestDestinationBatchRefusedOnUpdate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := h.merchant("m1")
	rabbit := map[string]any{"type": "rabbitmq", "url": "amqp://u:p@broker.example.com/", "routing_key": "q"}
	create := func(body map[string]any) string {
		body["events"] = []string{"*"}
		r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions", Key: key, Body: body})
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		return decode[struct {
			ID string `json:"id"`
		}](t, r).ID
	}
	broker, endpoint := create(map[string]any{"destination": rabbit}), create(map[string]any{"url": "https://example.com/h"})
	batch := map[string]any{"max_size": 10, "max_wait_ms": 100}
	for _, tc := range []struct {
		name   string
		id     string
		body   map[string]any
		status int
	}{
		{"a batch to a broker's subscription", broker, map[string]any{"batch": batch}, http.StatusBadRequest},
		{"a batch with a destination", endpoint, map[string]any{"destination": rabbit, "batch": batch}, http.StatusBadRequest},
		{"a batch to an HTTP endpoint", endpoint, map[string]any{"batch": batch}, http.StatusOK},
		{"no batch for a broker's subscription", broker, map[string]any{"batch": nil}, http.StatusOK},
	} {
		r := h.do(request{Method: http.MethodPost, Path: "/v1/webhook_subscriptions/" + tc.id, Key: key, Body: tc.body})
		if tc.status == http.StatusOK {
			if r.Status != http.StatusOK {
				t.Errorf("%s: %d %s", tc.name, r.Status, r.Body)
			}
			continue
		}
		if m := expectError(t, r, tc.status, "parameter_invalid"); m["param"] != "batch" {
			t.Errorf("%s: param %v (%v)", tc.name, m["param"], m["message"])
		}
	}
}
