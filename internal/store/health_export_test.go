package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ExplainedHealth is what Postgres did to count an endpoint's attempts.
type ExplainedHealth struct {
	ExplainedList
	// ExecutionMS is the statement's execution time as EXPLAIN measured it.
	ExecutionMS float64
}

// ExplainSubscriptionAttemptsFrom runs SubscriptionAttemptsFrom's
// statement under EXPLAIN ANALYZE, sent as the method sends it.
func (s *Store) ExplainSubscriptionAttemptsFrom(ctx context.Context, merchantID string, subscriptionID uuid.UUID, from time.Time) (ExplainedHealth, error) {
	return s.explainTimed(ctx, subscriptionAttemptsSQL, merchantID, subscriptionID, from.UTC().Truncate(time.Hour))
}

// explainTimed runs sql with args under EXPLAIN (ANALYZE, BUFFERS): what it
// read and how long it took.
func (s *Store) explainTimed(ctx context.Context, sql string, args ...any) (ExplainedHealth, error) {
	var plan string
	if err := s.pool.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		return ExplainedHealth{}, fmt.Errorf("explain: %w", err)
	}
	var doc []struct {
		Plan          planNode
		ExecutionTime float64 `json:"Execution Time"`
	}
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
		return ExplainedHealth{}, fmt.Errorf("read plan: %v\n%s", err, plan)
	}
	return ExplainedHealth{ExplainedList: ExplainedList{RowsExamined: doc[0].Plan.rowsExamined(), Plan: plan},
		ExecutionMS: doc[0].ExecutionTime}, nil
}
