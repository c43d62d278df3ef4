package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// benchEventType is a kind from the spec 6.1 catalogue, so that the engine
// accepts it without extra configuration.
const benchEventType = "payout.paid"

// engine talks to a running webhookd over its public and internal HTTP APIs,
// exactly as the core API and a merchant would.
type engine struct {
	api, internal, token string
	client               *http.Client
}

// newEngine returns a client of the engine at api (public) and internal,
// keeping up to conns idle connections to each, one per concurrent publisher.
func newEngine(api, internal, token string, conns int) *engine {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns * 2
	tr.MaxIdleConnsPerHost = conns
	return &engine{
		api:      strings.TrimRight(api, "/"),
		internal: strings.TrimRight(internal, "/"),
		token:    token,
		client:   &http.Client{Transport: tr, Timeout: 60 * time.Second},
	}
}

// apiError is a non-2xx answer, kept with its body for the report.
type apiError struct {
	method, url string
	status      int
	body        string
}

// Error names the request, the status and the engine's answer.
func (e *apiError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.method, e.url, e.status, e.body)
}

// do sends one JSON request and decodes a 2xx JSON answer into out (if non-nil).
func (e *engine) do(ctx context.Context, method, url string, header http.Header, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, url, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, url, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &apiError{method: method, url: url, status: resp.StatusCode, body: strings.TrimSpace(string(raw))}
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, url, err)
		}
	}
	return nil
}

// ingestHeader authenticates a request to the internal API.
func (e *engine) ingestHeader() http.Header {
	return http.Header{"Authorization": {"Bearer " + e.token}}
}

// issueKey makes an API key for merchant (creating the merchant on the way).
func (e *engine) issueKey(ctx context.Context, merchant string) (string, error) {
	var out struct {
		Key string `json:"key"`
	}
	err := e.do(ctx, http.MethodPost, e.internal+"/internal/v1/merchants/"+merchant+"/api_keys", e.ingestHeader(),
		map[string][]string{"scopes": {"webhooks:read", "webhooks:write"}}, &out)
	if err != nil {
		return "", fmt.Errorf("issue api key for %s: %w", merchant, err)
	}
	return out.Key, nil
}

// subscription is what the bench keeps of a created subscription.
type subscription struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

// merchantHeader authenticates a merchant's request to the public API with
// its API key, under a fresh idempotency key.
func merchantHeader(key string) http.Header {
	return http.Header{
		"Authorization":   {"Bearer " + key},
		"Idempotency-Key": {uuid.NewString()},
	}
}

// createSubscription subscribes url to every event of the key's merchant.
func (e *engine) createSubscription(ctx context.Context, key, url string) (subscription, error) {
	return e.createSubscriptionWith(ctx, key, map[string]any{"url": url})
}

// createSubscriptionWith subscribes to every event of the key's merchant
// with fields (a url, or a destination, and any other field of the API).
func (e *engine) createSubscriptionWith(ctx context.Context, key string, fields map[string]any) (subscription, error) {
	body := map[string]any{"events": []string{"*"}, "description": "webhookd-bench"}
	maps.Copy(body, fields)
	target := fmt.Sprint(fields["url"])
	if d, ok := fields["destination"].(map[string]any); ok {
		target = fmt.Sprintf("a %v destination", d["type"])
	}
	var s subscription
	err := e.do(ctx, http.MethodPost, e.api+"/v1/webhook_subscriptions", merchantHeader(key), body, &s)
	if err != nil {
		return s, fmt.Errorf("create subscription for %s: %w", target, err)
	}
	if s.ID == "" || s.Secret == "" {
		return s, fmt.Errorf("create subscription for %s: answer lacks id or secret", target)
	}
	return s, nil
}

// deleteSubscription removes a subscription so that its pending deliveries
// stop being retried after the run.
func (e *engine) deleteSubscription(ctx context.Context, key, id string) error {
	h := http.Header{"Authorization": {"Bearer " + key}}
	if err := e.do(ctx, http.MethodDelete, e.api+"/v1/webhook_subscriptions/"+id, h, nil, nil); err != nil {
		return fmt.Errorf("delete subscription %s: %w", id, err)
	}
	return nil
}

// disableSubscription stops a subscription without deleting it: the
// fallback when a delete fails, so that nothing keeps retrying after a run.
func (e *engine) disableSubscription(ctx context.Context, key, id string) error {
	if err := e.do(ctx, http.MethodPost, e.api+"/v1/webhook_subscriptions/"+id, merchantHeader(key),
		map[string]string{"status": "disabled"}, nil); err != nil {
		return fmt.Errorf("disable subscription %s: %w", id, err)
	}
	return nil
}

// updateSubscription changes fields of a subscription (the ratelimited
// scenario sets its rate_limit).
func (e *engine) updateSubscription(ctx context.Context, key, id string, fields map[string]any) error {
	if err := e.do(ctx, http.MethodPost, e.api+"/v1/webhook_subscriptions/"+id, merchantHeader(key), fields, nil); err != nil {
		return fmt.Errorf("update subscription %s: %w", id, err)
	}
	return nil
}

// event is one event as the internal ingest route takes it.
type event struct {
	ID         string          `json:"id"`
	MerchantID string          `json:"merchant_id"`
	Type       string          `json:"type"`
	Payload    json.RawMessage `json:"payload"`
}

// publish sends one event through POST /internal/v1/events.
func (e *engine) publish(ctx context.Context, ev event) error {
	return e.do(ctx, http.MethodPost, e.internal+"/internal/v1/events", e.ingestHeader(), ev, nil)
}

// errNoBatch reports an engine without the batch route; the bench then
// publishes one event per request.
var errNoBatch = errors.New("engine has no batch ingest route")

// publishBatch sends events through POST /internal/v1/events/batch.
func (e *engine) publishBatch(ctx context.Context, evs []event) error {
	err := e.do(ctx, http.MethodPost, e.internal+"/internal/v1/events/batch", e.ingestHeader(),
		map[string][]event{"events": evs}, nil)
	var ae *apiError
	if errors.As(err, &ae) && (ae.status == http.StatusNotFound || ae.status == http.StatusMethodNotAllowed) {
		return errNoBatch
	}
	return err
}

// metrics fetches GET <base>/metrics of each of the engine's internal base
// URLs (one per process) and returns every metric summed per name, over
// its labelled series and over the processes: process_cpu_seconds_total,
// webhookd_sweeper_requeued_total, ... are what the bench needs of them.
func (e *engine) metrics(ctx context.Context, bases []string) (map[string]float64, error) {
	total := make(map[string]float64)
	for _, base := range bases {
		m, err := e.metricsOf(ctx, base)
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			total[k] += v
		}
	}
	return total, nil
}

// metricsOf fetches one process's GET <base>/metrics.
func (e *engine) metricsOf(ctx context.Context, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics of %s: HTTP %d", base, resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text format: each sample's value is
// added to its metric name (labels dropped).
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := make(map[string]float64)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndexByte(rest, '}')
			if j < 0 {
				continue
			}
			rest = rest[j+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("metrics: read: %w", err)
	}
	return out, nil
}
