package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// This file lets the external tests see what Postgres does for the exact
// statements of the list reads, without shipping a diagnostic in the binary.

// ExplainedList is what Postgres did to run one list statement.
type ExplainedList struct {
	// RowsExamined counts the table rows that the plan's scans read,
	// whether they matched or not.
	RowsExamined int
	// Plan is the EXPLAIN (ANALYZE, FORMAT JSON) output, for messages.
	Plan string
}

// ExplainListEvents runs the statement of ListEvents under EXPLAIN ANALYZE.
func (s *Store) ExplainListEvents(ctx context.Context, merchantID string, f EventFilter, p Page) (ExplainedList, error) {
	q, err := s.Views.eventList(merchantID, f, p)
	if err != nil {
		return ExplainedList{}, err
	}
	return s.explainList(ctx, q)
}

// ExplainListDeliveries runs the statement of ListDeliveries under EXPLAIN
// ANALYZE.
func (s *Store) ExplainListDeliveries(ctx context.Context, merchantID string, f DeliveryFilter, p Page) (ExplainedList, error) {
	q, err := s.Views.deliveryList(merchantID, f, p)
	if err != nil {
		return ExplainedList{}, err
	}
	return s.explainList(ctx, q)
}

// explainList explains one run of the statement, sent as runList sends it.
func (s *Store) explainList(ctx context.Context, q listQuery) (ExplainedList, error) {
	sql, args := q.statement()
	var plan string
	err := s.pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, append([]any{listExecMode}, args...)...).Scan(&plan)
	if err != nil {
		return ExplainedList{}, fmt.Errorf("explain %s: %w", sql, err)
	}
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
		return ExplainedList{}, fmt.Errorf("read plan: %v\n%s", err, plan)
	}
	return ExplainedList{RowsExamined: doc[0].Plan.rowsExamined(), Plan: plan}, nil
}

// planNode is one node of an EXPLAIN (ANALYZE, FORMAT JSON) plan. Its counts
// are averages per loop, as EXPLAIN prints them.
type planNode struct {
	NodeType        string     `json:"Node Type"`
	ActualRows      float64    `json:"Actual Rows"`
	ActualLoops     float64    `json:"Actual Loops"`
	RemovedByFilter float64    `json:"Rows Removed by Filter"`
	RemovedByCheck  float64    `json:"Rows Removed by Index Recheck"`
	IndexName       string     `json:"Index Name"`
	IndexCond       string     `json:"Index Cond"`
	Plans           []planNode `json:"Plans"`
}

// wholeIndexes names the indexes the plan may read whole: scanned with no
// index condition, for their predicate or their order only.
func (n planNode) wholeIndexes() []string {
	var out []string
	if (n.NodeType == "Index Scan" || n.NodeType == "Index Only Scan") && n.IndexCond == "" {
		out = append(out, n.IndexName)
	}
	for _, c := range n.Plans {
		out = append(out, c.wholeIndexes()...)
	}
	return out
}

// rowsExamined sums, over the nodes that read a table, the rows they
// returned and the rows their filters threw away.
func (n planNode) rowsExamined() int {
	return n.rowsOf("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan")
}

// rowsOf sums, over the nodes of the given types, the rows they returned
// and the rows their filters threw away.
func (n planNode) rowsOf(nodeTypes ...string) int {
	total := 0
	if slices.Contains(nodeTypes, n.NodeType) {
		total = int((n.ActualRows + n.RemovedByFilter + n.RemovedByCheck) * n.ActualLoops)
	}
	for _, c := range n.Plans {
		total += c.rowsOf(nodeTypes...)
	}
	return total
}
