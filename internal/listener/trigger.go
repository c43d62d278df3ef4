package listener

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
)

// TriggerEvent asks the engine at api to publish an event of type typ
// with the catalogue's example payload to the merchant's own
// subscriptions and listeners (POST /v1/event_types/{type}/trigger), and
// returns the event's id. A refusal is an *APIError.
func TriggerEvent(ctx context.Context, client *http.Client, api, apiKey, typ string) (string, error) {
	u, err := url.Parse(strings.TrimRight(api, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("--api %q: expected the engine's http(s) base URL", api)
	}
	u = u.JoinPath("v1", "event_types", typ, "trigger")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("trigger %s: %w", typ, err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	// One key per command: a retry of this request by hand is a new event,
	// which is what a developer re-running the command means.
	req.Header.Set("Idempotency-Key", uuid.NewString())
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("trigger %s: %w", typ, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("trigger %s: %w", typ, err)
	}
	if resp.StatusCode != http.StatusAccepted {
		refused := &APIError{Status: resp.StatusCode}
		_ = json.Unmarshal(body, refused)
		return "", refused
	}
	var ev struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		return "", fmt.Errorf("trigger %s: the engine answered 202 without an event: %s", typ, body)
	}
	return ev.ID, nil
}
