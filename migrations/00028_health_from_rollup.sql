-- +goose Up

-- An endpoint's health counts its attempts from the hourly rollup
-- (attempt_stats) over the stats endpoint's 24-hour window, no longer from
-- the deliveries updated since a time: the index that found those cost
-- two index entries for every delivery recorded (its insert and its
-- outcome's new row version), and the count grew with the endpoint's
-- attempts of the day.
DROP INDEX IF EXISTS deliveries_subscription_updated_idx;

-- +goose Down
CREATE INDEX deliveries_subscription_updated_idx ON deliveries (subscription_id, updated_at) WHERE NOT test;
