-- +goose Up

-- The request headers an attempt sent, as {"Name": "value"}: the Standard
-- Webhooks ones (the signature included: it is no secret), content type,
-- user agent, the ordering headers and the subscription's own headers with
-- their values masked as reads mask them, Authorization masked too. NULL for
-- attempts recorded before this column, and for listeners' attempts.
ALTER TABLE attempts ADD COLUMN request_headers jsonb;

-- attempt_duration_bounds are the lower bounds, in milliseconds, of the
-- response-time slots of attempt_stats (slot i holds durations from
-- bounds[i] up to bounds[i+1]; the last one, from 60 s on, has no end). A
-- percentile read from them is exact to within its slot, about a third of
-- its value. Written once: the recorder, the backfill below and the stats
-- read (internal/store/stats.go) all use them.
-- +goose StatementBegin
CREATE FUNCTION attempt_duration_bounds() RETURNS int[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ARRAY[0, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700,
                 1000, 1500, 2000, 3000, 5000, 7000, 10000, 15000, 20000, 30000, 60000]
$$;
-- +goose StatementEnd

-- attempt_duration_slot is an attempt's slot: 0 when no response came back
-- (a refused connection, a timeout: no response time to count), else the
-- slot of its duration.
-- +goose StatementBegin
CREATE FUNCTION attempt_duration_slot(http_status int, duration_ms int) RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN http_status IS NULL THEN 0
        ELSE width_bucket(greatest(duration_ms, 0), attempt_duration_bounds()) END::smallint
$$;
-- +goose StatementEnd

-- attempt_stats rolls a subscription's attempts up by the hour (UTC) and
-- response-time slot, written by the same statement that records the
-- attempts (RecordAttempts), test deliveries left out. GET
-- /v1/webhook_subscriptions/{id}/stats reads at most 168 hours of it
-- instead of up to millions of attempts (a raw read of a million attempts
-- took seconds; this takes milliseconds). retrying counts failed attempts
-- after which the delivery was still pending; failed those that ended it.
-- Rows older than the retention are deleted with the idempotency keys.
CREATE TABLE attempt_stats (
    subscription_id uuid NOT NULL,
    hour            timestamptz NOT NULL,
    slot            smallint NOT NULL,
    succeeded       integer NOT NULL DEFAULT 0,
    retrying        integer NOT NULL DEFAULT 0,
    failed          integer NOT NULL DEFAULT 0,
    PRIMARY KEY (subscription_id, hour, slot)
);

-- The attempts already recorded, rolled up once. On a large database this
-- reads the retention's attempts: run it at a quiet time.
INSERT INTO attempt_stats (subscription_id, hour, slot, succeeded, retrying, failed)
SELECT d.subscription_id, date_trunc('hour', a.attempted_at, 'UTC'), attempt_duration_slot(a.http_status, a.duration_ms),
    count(*) FILTER (WHERE a.status = 'succeeded'),
    count(*) FILTER (WHERE a.status = 'failed' AND (d.status = 'pending' OR a.number < d.attempt_count)),
    count(*) FILTER (WHERE a.status = 'failed' AND NOT (d.status = 'pending' OR a.number < d.attempt_count))
FROM attempts a JOIN deliveries d ON d.id = a.delivery_id AND d.created_at = a.delivery_created_at
WHERE NOT d.test
GROUP BY 1, 2, 3;

-- +goose Down
DROP TABLE attempt_stats;
DROP FUNCTION attempt_duration_slot(int, int);
DROP FUNCTION attempt_duration_bounds();
ALTER TABLE attempts DROP COLUMN request_headers;
