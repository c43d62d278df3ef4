package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Views owns the merchant-facing reads of events and deliveries (GET
// /v1/events, /v1/webhook_deliveries): lists walking the index made for
// their filters, and single reads, all within retention.
type Views struct {
	db
}

// Every read is scoped to one merchant and to the 30-day
// retention: a row whose partition is not dropped yet is still gone for the
// merchant once it is older than Retention (spec 6.4 rule 6).

// EventFilter narrows an event list; zero fields do not filter.
type EventFilter struct {
	// Type keeps events of that type.
	Type string
	// CreatedGTE keeps events created at or after it.
	CreatedGTE *time.Time
	// DeliveryStatus keeps events with at least one delivery in that
	// status (see eventDeliveryStatus).
	DeliveryStatus DeliveryStatus
}

// DeliveryFilter narrows a delivery list; zero fields do not filter.
type DeliveryFilter struct {
	// Status is pending, succeeded or failed.
	Status DeliveryStatus
	// CreatedGTE keeps deliveries created at or after it.
	CreatedGTE *time.Time
	// EventID keeps the deliveries of one event.
	EventID *uuid.UUID
	// SubscriptionID keeps the deliveries to one subscription.
	SubscriptionID *uuid.UUID
}

// listFrom is the lower bound on created_at of a list: the greater of the
// created_at.gte filter and the retention start, so that the planner prunes
// to the partitions asked for.
func (s *Views) listFrom(gte *time.Time) time.Time {
	from := s.retentionStart()
	if gte != nil && gte.After(from) {
		from = *gte
	}
	return from
}

// MaxRowsExamined bounds the rows that one list request reads from its table
// when the index its read walks does not serve all its filters (see
// listQuery): about 10 ms of work, whatever the merchant's volume.
const MaxRowsExamined = 10_000

// listOrder is the order of every list (spec 4.5) and of the indexes that
// serve them.
const listOrder = " ORDER BY created_at DESC, id DESC"

// listExecMode plans each list statement for its values (a custom plan),
// where Open makes every other statement use generic plans. A generic plan
// costs "subscription_id = $2" from the column's distinct count alone: for a
// merchant with one subscription it is no filter at all, so the plan walks
// the merchant's index and reads every row of 30 days when the id asked for
// is another (a deleted subscription, another merchant's); and it walks that
// index too for "status = $2" in a day's partition where every delivery
// succeeded. With the values in hand, the planner sees from the statistics
// that the id or the status is rare and walks the index that serves it.
// Planning a list costs about a millisecond; lists are few next to the
// worker's statements, for which Open chose generic plans.
const listExecMode = pgx.QueryExecModeSimpleProtocol

// listQuery is the statement of one list request. Each combination of
// filters gets its own statement text, which walks the index made for that
// combination in the list's order, so that LIMIT stops the read after one
// page. A condition written once for every case, such as
// "($3 = ” OR type = $3)", serves no index and made the read go through
// every row of the merchant; so did a cursor bound written that way, on
// every later page.
//
// A filter that the walked index does not serve (a residual) is checked on
// at most MaxRowsExamined rows: when those hold fewer matches than the page
// wants, the page comes back short, even empty, with a resume cursor after
// the last row examined, and the next page goes on from there.
type listQuery struct {
	table, columns   string
	limit            int
	conds, residuals []string
	args             []any
}

func (q *listQuery) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

// where adds a condition that the walked index serves; %s stands for v.
func (q *listQuery) where(cond string, v any) { q.conds = append(q.conds, fmt.Sprintf(cond, q.arg(v))) }

// residual adds a condition that the walked index does not serve.
func (q *listQuery) residual(cond string, v any) {
	q.residuals = append(q.residuals, fmt.Sprintf(cond, q.arg(v)))
}

// bounds adds the lower bound on created_at and the cursor's keyset bound:
// both are ranges on the index's order columns.
func (q *listQuery) bounds(from time.Time, p Page) error {
	q.where("created_at >= %s", from)
	if p.After == nil {
		return nil
	}
	id, err := uuid.Parse(p.After.ID)
	if err != nil {
		return fmt.Errorf("cursor id: %w", err)
	}
	q.conds = append(q.conds, fmt.Sprintf("(created_at, id) < (%s::timestamptz, %s::uuid)", q.arg(p.After.CreatedAt), q.arg(id)))
	return nil
}

// statement is the SQL and its arguments. Each row starts with a flag: true
// for a row of the page, NULL for the last row examined by a read that
// stopped at MaxRowsExamined (it is where the next page resumes).
func (q listQuery) statement() (string, []any) {
	args := slices.Clone(q.args)
	limit := "$" + strconv.Itoa(len(args)+1)
	args = append(args, q.limit)
	read := " FROM " + q.table + " WHERE " + strings.Join(q.conds, " AND ") + listOrder
	if len(q.residuals) == 0 {
		return "SELECT true, " + q.columns + read + " LIMIT " + limit, args
	}
	limitExamined := strconv.Itoa(MaxRowsExamined)
	return "WITH examined AS MATERIALIZED (SELECT " + strings.Join(q.residuals, " AND ") + " AS hit, " + q.columns + read +
		" LIMIT " + limitExamined + ")" +
		" (SELECT true, " + q.columns + " FROM examined WHERE hit" + listOrder + " LIMIT " + limit + ")" +
		" UNION ALL (SELECT NULL, " + q.columns + " FROM examined WHERE (SELECT count(*) FROM examined) = " + limitExamined +
		" ORDER BY created_at, id LIMIT 1)", args
}

// flaggedRow lets a row scanner read a list row past its leading flag.
type flaggedRow struct {
	pgx.CollectableRow
	flag **bool
}

func (r flaggedRow) Scan(dest ...any) error {
	return r.CollectableRow.Scan(append([]any{r.flag}, dest...)...)
}

// runList runs q and splits its rows into the page and the resume cursor.
func runList[T any](ctx context.Context, db querier, q listQuery, scan func(pgx.CollectableRow) (T, error), position func(T) Cursor) ([]T, *Cursor, error) {
	sql, args := q.statement()
	rows, err := db.Query(ctx, sql, append([]any{listExecMode}, args...)...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var page []T
	var resume *Cursor
	for rows.Next() {
		var flag *bool
		v, err := scan(flaggedRow{CollectableRow: rows, flag: &flag})
		if err != nil {
			return nil, nil, err
		}
		if flag == nil {
			c := position(v)
			resume = &c
			continue
		}
		page = append(page, v)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(page) >= q.limit {
		resume = nil // the extra row already tells there is more
	}
	return page, resume, nil
}

// ListEvents returns one page of the merchant's events, newest first: up to
// p.Limit+1 rows (the extra one tells the caller there is another page), or
// fewer with a resume cursor when the read stopped at MaxRowsExamined (see
// listQuery).
func (s *Views) ListEvents(ctx context.Context, merchantID string, f EventFilter, p Page) ([]Event, *Cursor, error) {
	q, err := s.eventList(merchantID, f, p)
	if err != nil {
		return nil, nil, fmt.Errorf("list events of %s: %w", merchantID, err)
	}
	events, resume, err := runList(ctx, s.pool, q, scanEvent, func(e Event) Cursor { return Cursor{CreatedAt: e.CreatedAt, ID: e.ID.String()} })
	if err != nil {
		return nil, nil, fmt.Errorf("list events of %s: %w", merchantID, err)
	}
	return events, resume, nil
}

// eventList is the statement of ListEvents. events_merchant_type_idx serves
// the event_type filter, events_merchant_idx the rest.
func (s *Views) eventList(merchantID string, f EventFilter, p Page) (listQuery, error) {
	q := listQuery{table: "events", columns: eventColumns, limit: p.Limit + 1}
	q.where("merchant_id = %s", merchantID)
	if f.Type != "" {
		q.where("type = %s", f.Type)
	}
	if f.DeliveryStatus != "" {
		cond, stored := storedStatus(f.DeliveryStatus)
		q.residual(fmt.Sprintf(eventDeliveryStatus, cond), stored)
	}
	return q, q.bounds(s.listFrom(f.CreatedGTE), p)
}

// eventColumns is the column list scanEvent reads, in its order.
const eventColumns = "id, merchant_id, type, api_version, body, created_at, deliver_at"

// GetEvent returns one of the merchant's events. Another merchant's, or one
// past retention, is ErrNotFound.
func (s *Views) GetEvent(ctx context.Context, merchantID string, id uuid.UUID) (Event, error) {
	// event_ids gives created_at, so that the events lookup prunes to one
	// partition.
	rows, err := s.pool.Query(ctx, `
		SELECT e.id, e.merchant_id, e.type, e.api_version, e.body, e.created_at, e.deliver_at
		FROM event_ids i JOIN events e ON e.id = i.id AND e.created_at = i.created_at
		WHERE i.id = $1 AND e.merchant_id = $2 AND e.created_at >= $3`, id, merchantID, s.retentionStart())
	if err != nil {
		return Event{}, fmt.Errorf("get event %s: %w", id, err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanEvent)
	if err != nil {
		return Event{}, fmt.Errorf("get event %s: %w", id, notFound(err))
	}
	return e, nil
}

func scanEvent(row pgx.CollectableRow) (Event, error) {
	var e Event
	err := row.Scan(&e.ID, &e.MerchantID, &e.Type, &e.APIVersion, &e.Body, &e.CreatedAt, &e.DeliverAt)
	return e, err
}

// ListDeliveries returns one page of the merchant's deliveries with their
// attempts, newest first: up to p.Limit+1 rows, or fewer with a resume cursor
// when the read stopped at MaxRowsExamined (see listQuery).
func (s *Views) ListDeliveries(ctx context.Context, merchantID string, f DeliveryFilter, p Page) ([]Delivery, *Cursor, error) {
	q, err := s.deliveryList(merchantID, f, p)
	if err != nil {
		return nil, nil, fmt.Errorf("list deliveries of %s: %w", merchantID, err)
	}
	ds, resume, err := runList(ctx, s.pool, q, scanDelivery, func(d Delivery) Cursor { return Cursor{CreatedAt: d.CreatedAt, ID: d.ID.String()} })
	if err != nil {
		return nil, nil, fmt.Errorf("list deliveries of %s: %w", merchantID, err)
	}
	if err := s.attachAttempts(ctx, ds, s.listFrom(f.CreatedGTE)); err != nil {
		return nil, nil, fmt.Errorf("list deliveries of %s: %w", merchantID, err)
	}
	return ds, resume, nil
}

// deliveryList is the statement of ListDeliveries. Which index the scan walks
// decides which filters it serves:
//   - event_id: deliveries_event_idx; the rows read are the event's fan-out,
//     at most one per subscription, so every other filter is checked on them;
//   - subscription_id: deliveries_merchant_subscription_idx; status, if also
//     given, is checked on at most MaxRowsExamined rows;
//   - status alone: deliveries_merchant_status_idx;
//   - nothing: deliveries_merchant_idx.
func (s *Views) deliveryList(merchantID string, f DeliveryFilter, p Page) (listQuery, error) {
	q := listQuery{table: shownDeliveries, columns: shownDeliveryColumns, limit: p.Limit + 1}
	q.where("merchant_id = %s", merchantID)
	status, stored := storedStatus(f.Status)
	switch {
	case f.EventID != nil:
		q.where("event_id = %s", *f.EventID)
		if f.SubscriptionID != nil {
			q.where("subscription_id = %s", *f.SubscriptionID)
		}
		if f.Status != "" {
			q.where(status, stored)
		}
	case f.SubscriptionID != nil:
		q.where("subscription_id = %s", *f.SubscriptionID)
		if f.Status != "" {
			q.residual(status, stored)
		}
	case f.Status != "":
		q.where(status, stored)
	}
	return q, q.bounds(s.listFrom(f.CreatedGTE), p)
}

// attachAttempts fills the Attempts of ds with one query. from bounds the
// partitions searched: no delivery of ds is older.
func (s *Views) attachAttempts(ctx context.Context, ds []Delivery, from time.Time) error {
	if len(ds) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(ds))
	index := make(map[uuid.UUID]int, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
		index[d.ID] = i
		ds[i].Attempts = []Attempt{}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+attemptRowColumns+`
		FROM attempts WHERE delivery_id = ANY($1) AND delivery_created_at >= $2
		ORDER BY delivery_id, number`, ids, from)
	if err != nil {
		return fmt.Errorf("attempts: %w", err)
	}
	attempts, err := pgx.CollectRows(rows, scanAttempt)
	if err != nil {
		return fmt.Errorf("attempts: %w", err)
	}
	for _, a := range attempts {
		i := index[a.DeliveryID]
		ds[i].Attempts = append(ds[i].Attempts, a)
	}
	return nil
}

// GetDelivery returns one of the merchant's deliveries with its attempts.
// Another merchant's, or one past retention, is ErrNotFound.
func (s *Views) GetDelivery(ctx context.Context, merchantID string, id uuid.UUID) (Delivery, error) {
	d, err := readDeliveryFrom(ctx, s.pool, id, shownDeliveries, shownDeliveryColumns)
	if err != nil {
		return Delivery{}, err
	}
	if d.MerchantID != merchantID || d.CreatedAt.Before(s.retentionStart()) {
		return Delivery{}, fmt.Errorf("get delivery %s: %w", id, ErrNotFound)
	}
	if d.Attempts == nil {
		d.Attempts = []Attempt{}
	}
	return d, nil
}

// isScheduled is the condition, on a delivery row, that reads show it as
// scheduled: a pending delivery of a scheduled event whose first attempt
// is not recorded yet. It is stored as pending, so that leases, the
// sweeper, drops and stats treat it as any delivery waiting for its due
// time.
const isScheduled = "status = 'pending' AND attempt_count = 0 AND deliver_at IS NOT NULL"

// shownDeliveries is the deliveries table as merchants' reads see it: with
// shown_status, the status a read shows (scheduled for isScheduled). A
// plain subquery, which the planner pulls up, so reads keep their indexes.
const shownDeliveries = "(SELECT *, CASE WHEN " + isScheduled + " THEN '" + string(DeliveryScheduled) +
	"' ELSE status END AS shown_status FROM deliveries) deliveries"

// shownDeliveryColumns is deliveryColumns with shown_status for status.
const shownDeliveryColumns = `id, merchant_id, event_id, event_created_at, event_type, subscription_id,
	shown_status, test, attempt_count, next_attempt_at, created_at, updated_at`

// storedStatus is a delivery list's status filter as a condition on the
// stored status (whose index serves it; %s stands for the stored value):
// scheduled and pending are both stored as pending and told apart by
// isScheduled.
func storedStatus(shown DeliveryStatus) (cond string, stored DeliveryStatus) {
	switch shown {
	case DeliveryScheduled:
		return "status = %s AND attempt_count = 0 AND deliver_at IS NOT NULL", DeliveryPending
	case DeliveryPending:
		return "status = %s AND (attempt_count > 0 OR deliver_at IS NULL)", DeliveryPending
	}
	return "status = %s", shown
}
