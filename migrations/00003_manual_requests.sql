-- +goose Up

-- A redeliver (or recover) is answered 202 before a worker makes its
-- attempt. The request is counted here, in Postgres, so that a task lost
-- with Redis (flushed, restarted) is found again by the sweeper: an
-- accepted request is never lost. A manual attempt's record takes one off.
ALTER TABLE deliveries ADD COLUMN manual_requested integer NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN manual_requested_at timestamptz;
CREATE INDEX deliveries_manual_idx ON deliveries (manual_requested_at) WHERE manual_requested > 0;

-- +goose Down
DROP INDEX deliveries_manual_idx;
ALTER TABLE deliveries DROP COLUMN manual_requested_at;
ALTER TABLE deliveries DROP COLUMN manual_requested;
