package store

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// attemptRowColumns is the column list scanAttempt reads, in its order: every
// read of attempts shows the same fields.
const attemptRowColumns = "delivery_id, number, status, trigger, http_status, error, duration_ms, response_body, attempted_at, request_headers, batch_id, transformation_version, request_body"

// scanAttempt reads one row of attemptRowColumns.
func scanAttempt(row pgx.CollectableRow) (Attempt, error) {
	var a Attempt
	err := row.Scan(&a.DeliveryID, &a.Number, &a.Status, &a.Trigger, &a.HTTPStatus, &a.Error,
		&a.DurationMS, &a.ResponseBody, &a.AttemptedAt, &a.RequestHeaders, &a.BatchID, &a.TransformationVersion, &a.RequestBody)
	return a, err
}

// headersJSON is an attempt's request headers as the jsonb column holds
// them; nil (NULL) when none were recorded.
func headersJSON(h map[string]string) (*string, error) {
	if h == nil {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("request headers: %w", err)
	}
	s := string(b)
	return &s, nil
}
