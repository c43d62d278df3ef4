package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// FilteredSubscription is a subscription with a filter that an event's
// fan-out must evaluate.
type FilteredSubscription struct {
	ID uuid.UUID
	// Version is the subscription's updated_at: a cache of its compiled
	// filter keyed by it is never stale.
	Version time.Time
	Filter  string
}

// MerchantWithFilters returns the merchant and, in the same statement,
// the filters an event of eventType must pass to reach each of its
// endpoints that has one (enabled, or disabled for a skipped delivery).
// The publisher reads the merchant for every event anyway, so filters
// cost no extra round trip, and subscriptions without a filter are not
// read at all: the fan-out statement selects them itself.
func (s *Events) MerchantWithFilters(ctx context.Context, id, eventType string) (Merchant, []FilteredSubscription, error) {
	key := MerchantEventType{MerchantID: id, EventType: eventType}
	found, err := s.MerchantsWithFilters(ctx, []MerchantEventType{key})
	if err != nil {
		return Merchant{}, nil, err
	}
	mf, ok := found[key]
	if !ok {
		return Merchant{}, nil, fmt.Errorf("get merchant %s with filters: %w", id, ErrNotFound)
	}
	return mf.Merchant, mf.Filters, nil
}

// MerchantEventType names a merchant and the type of an event it publishes.
type MerchantEventType struct {
	MerchantID string
	EventType  string
}

// MerchantFilters is a merchant with the filters an event of one type must
// pass (see MerchantWithFilters).
type MerchantFilters struct {
	Merchant Merchant
	Filters  []FilteredSubscription
}

// MerchantsWithFilters is MerchantWithFilters for every pair of keys in one
// statement, so that a group of publishes reads its merchants in one round
// trip. A merchant not found is absent from the map.
func (s *Events) MerchantsWithFilters(ctx context.Context, keys []MerchantEventType) (map[MerchantEventType]MerchantFilters, error) {
	ids, types := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		ids[i], types[i] = k.MerchantID, k.EventType
	}
	rows, err := s.pool.Query(ctx, `
		SELECT q.type, `+qualified("m", merchantColumns)+`, f.ids, f.versions, f.exprs
		FROM unnest($1::text[], $2::text[]) AS q (id, type)
		JOIN merchants m ON m.id = q.id
		CROSS JOIN LATERAL (
			SELECT array_agg(s.id) AS ids, array_agg(s.updated_at) AS versions, array_agg(s.filter) AS exprs
			FROM subscriptions s
			WHERE s.merchant_id = m.id AND s.deleted_at IS NULL AND s.filter IS NOT NULL
			  AND (s.status = 'enabled' OR (s.status = 'disabled' AND s.kind = 'endpoint'))
			  AND s.events && ARRAY[q.type, '*']) f`, ids, types)
	if err != nil {
		return nil, fmt.Errorf("get %d merchants with filters: %w", len(keys), err)
	}
	defer rows.Close()
	found := make(map[MerchantEventType]MerchantFilters, len(keys))
	for rows.Next() {
		var (
			m         Merchant
			eventType string
			subs      []uuid.UUID
			versions  []time.Time
			exprs     []string
		)
		if err := rows.Scan(&eventType, &m.ID, &m.APIVersion, &m.NotificationEmail, &m.PortalAccentColor, &m.PortalLogoURL,
			&m.CreatedAt, &m.UpdatedAt, &m.RetentionDays, &subs, &versions, &exprs); err != nil {
			return nil, fmt.Errorf("get %d merchants with filters: %w", len(keys), err)
		}
		filters := make([]FilteredSubscription, len(subs))
		for i := range subs {
			filters[i] = FilteredSubscription{ID: subs[i], Version: versions[i], Filter: exprs[i]}
		}
		found[MerchantEventType{MerchantID: m.ID, EventType: eventType}] = MerchantFilters{Merchant: m, Filters: filters}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("get %d merchants with filters: %w", len(keys), err)
	}
	return found, nil
}
