// Package pollcli is `webhookd poll`: it reads a poll subscription's
// deliveries through the public API (GET
// /v1/webhook_subscriptions/{id}/poll) and prints them, one line each. The
// HTTP exchange is client.go's; what is read and printed is reader.go's.
package pollcli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/internal/listener"
)

// Item is one delivery read, as the API answers it.
type Item struct {
	ID          string          `json:"id"`
	Timestamp   string          `json:"timestamp"`
	Signature   string          `json:"signature"`
	ContentType string          `json:"content_type"`
	Body        string          `json:"body"`
	Event       json.RawMessage `json:"event"`
	DeliveryID  string          `json:"delivery_id"`
	EventType   string          `json:"event_type"`
	Test        bool            `json:"test"`
	CreatedAt   time.Time       `json:"created_at"`
}

// Page is one read's answer.
type Page struct {
	Data     []Item `json:"data"`
	Iterator string `json:"iterator"`
	Done     bool   `json:"done"`
}

// Query is one read's parameters; zero values are left out.
type Query struct {
	Iterator string
	Since    string
	Limit    int
	Wait     time.Duration
}

// Client reads poll subscriptions of the merchant whose key it holds.
type Client struct {
	// API is the engine's public base URL; APIKey a key of the merchant
	// with webhooks:read.
	API, APIKey string
	// HTTP sends the requests; its timeout must exceed the longest wait
	// (30 s).
	HTTP *http.Client
}

// Read reads subscriptionID's line once. A refusal is a
// *listener.APIError (the engine's error body).
func (c Client) Read(ctx context.Context, subscriptionID string, q Query) (Page, error) {
	u, err := url.Parse(strings.TrimRight(c.API, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return Page{}, fmt.Errorf("--api %q: expected the engine's http(s) base URL", c.API)
	}
	u = u.JoinPath("v1", "webhook_subscriptions", subscriptionID, "poll")
	v := url.Values{}
	if q.Iterator != "" {
		v.Set("iterator", q.Iterator)
	}
	if q.Since != "" {
		v.Set("since", q.Since)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Wait > 0 {
		v.Set("wait", strconv.Itoa(int(q.Wait/time.Second)))
	}
	u.RawQuery = v.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Page{}, fmt.Errorf("poll %s: %w", subscriptionID, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.APIKey)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Page{}, fmt.Errorf("poll %s: %w", subscriptionID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return Page{}, fmt.Errorf("poll %s: %w", subscriptionID, err)
	}
	if resp.StatusCode != http.StatusOK {
		refused := &listener.APIError{Status: resp.StatusCode}
		_ = json.Unmarshal(body, refused)
		return Page{}, refused
	}
	var p Page
	if err := json.Unmarshal(body, &p); err != nil {
		return Page{}, fmt.Errorf("poll %s: the engine answered 200 with no page: %w", subscriptionID, err)
	}
	return p, nil
}
