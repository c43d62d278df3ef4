-- +goose Up

-- Every list filter of the merchant API is served by an index whose order is
-- the list's (created_at DESC, id DESC), so that LIMIT stops the read after
-- one page instead of reading all the merchant's rows of the last 30 days
-- to find the few that match (store/views.go, listQuery). The filters that
-- 00001 already serves: none (events_merchant_idx, deliveries_merchant_idx)
-- and event_id (deliveries_event_idx: one event's fan-out).
--
-- On a large live database, build each partition's index CONCURRENTLY first
-- and attach it; on the parent these statements then only link them.

-- GET /v1/events?event_type=… (events are never updated: one entry per event).
CREATE INDEX events_merchant_type_idx ON events (merchant_id, type, created_at DESC, id DESC);

-- GET /v1/webhook_deliveries?status=failed|pending (failed is the common
-- search; both are rare among the rest). Succeeded deliveries, nearly all of
-- them, stay out of it, so that a delivery's entry lives only while it is
-- pending or failed and the index stays small; status=succeeded walks the
-- merchant index, where nearly every row matches.
CREATE INDEX deliveries_merchant_status_idx ON deliveries (merchant_id, status, created_at DESC, id DESC)
    WHERE status <> 'succeeded';

-- GET /v1/webhook_deliveries?subscription_id=… The merchant leads, so that
-- another merchant's subscription id reads nothing.
CREATE INDEX deliveries_merchant_subscription_idx ON deliveries (merchant_id, subscription_id, created_at DESC, id DESC);

-- +goose Down
DROP INDEX deliveries_merchant_subscription_idx;
DROP INDEX deliveries_merchant_status_idx;
DROP INDEX events_merchant_type_idx;
