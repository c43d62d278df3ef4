// Package keyscli is `webhookd keys list|revoke|roll`: an operator's
// command that manages a merchant's API keys through the internal API of
// a running engine, as any other client of that API would.
package keyscli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Key is what the internal API shows of an API key.
type Key struct {
	ID          string     `json:"id"`
	Prefix      *string    `json:"prefix"`
	Environment string     `json:"environment"`
	Scopes      []string   `json:"scopes"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"created_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

// IssuedKey is a key just made, with the key itself.
type IssuedKey struct {
	Key
	Secret string `json:"key"`
}

// APIError is the internal API's refusal.
type APIError struct {
	Status  int
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

// Error says the status, the code and the API's message.
func (e *APIError) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	if e.Param != nil && *e.Param != "" {
		msg += " (" + *e.Param + ")"
	}
	return msg
}

// Client calls the API key routes of webhookd's internal API.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// requestTimeout bounds one call: every key route answers in milliseconds.
const requestTimeout = 10 * time.Second

// NewClient is a Client of the internal API at base (http://host:port)
// sending token, the engine's ingest token.
func NewClient(base, token string) *Client {
	return &Client{base: strings.TrimSuffix(base, "/"), token: token, http: &http.Client{Timeout: requestTimeout}}
}

// List returns every key of the merchant, newest first, following the
// list's pages to the end.
func (c *Client) List(ctx context.Context, merchant string) ([]Key, error) {
	var keys []Key
	cursor := ""
	for {
		path := keysPath(merchant) + "?limit=100"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var page struct {
			Data       []Key   `json:"data"`
			HasMore    bool    `json:"has_more"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := c.call(ctx, http.MethodGet, path, nil, http.StatusOK, &page); err != nil {
			return keys, err
		}
		keys = append(keys, page.Data...)
		if !page.HasMore || page.NextCursor == nil || *page.NextCursor == "" {
			return keys, nil
		}
		cursor = *page.NextCursor
	}
}

// Revoke ends one key of the merchant at once and returns it.
func (c *Client) Revoke(ctx context.Context, merchant, keyID string) (Key, error) {
	var k Key
	err := c.call(ctx, http.MethodDelete, keysPath(merchant)+"/"+url.PathEscape(keyID), nil, http.StatusOK, &k)
	return k, err
}

// Roll makes a successor to one key of the merchant; overlapSeconds nil
// keeps the engine's default overlap.
func (c *Client) Roll(ctx context.Context, merchant, keyID string, overlapSeconds *int64) (IssuedKey, error) {
	body := map[string]any{}
	if overlapSeconds != nil {
		body["overlap_seconds"] = *overlapSeconds
	}
	var k IssuedKey
	err := c.call(ctx, http.MethodPost, keysPath(merchant)+"/"+url.PathEscape(keyID)+"/roll", body, http.StatusCreated, &k)
	return k, err
}

// keysPath is the path of a merchant's keys, its id escaped as one segment.
func keysPath(merchant string) string {
	return "/internal/v1/merchants/" + url.PathEscape(merchant) + "/api_keys"
}

// call sends one request and decodes the answer of status into out, or
// the API's error.
func (c *Client) call(ctx context.Context, method, path string, body any, status int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("build the request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the internal API at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read the answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode != status {
		apiErr := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(b, apiErr) != nil || apiErr.Code == "" {
			return fmt.Errorf("%s %s answered %d: %.200s", method, path, resp.StatusCode, b)
		}
		return apiErr
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode the answer of %s %s: %w", method, path, err)
	}
	return nil
}

// IsUnauthorized tells whether err is the API refusing the token.
func IsUnauthorized(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized
}
