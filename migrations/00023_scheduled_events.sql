-- +goose Up

-- Scheduled events (docs/api.md, "Scheduled publishing"): an event published
-- with deliver_at keeps it, and so does each of its deliveries, whose first
-- attempt is due then (next_attempt_at). Such a delivery is stored as
-- pending and shown as scheduled until its first attempt is recorded
-- (internal/store/views.go): the engine's leases, sweeper, drops and stats
-- need no new status. Both columns are NULL for an event delivered at once;
-- adding a nullable column writes no row.
ALTER TABLE events ADD COLUMN deliver_at timestamptz;
ALTER TABLE deliveries ADD COLUMN deliver_at timestamptz;

-- A scheduled delivery cancelled before its first attempt is 'cancelled':
-- never attempted, due never.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check
    CHECK (status IN ('pending', 'succeeded', 'failed', 'skipped', 'cancelled'));

-- +goose Down
DELETE FROM deliveries WHERE status = 'cancelled';
ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check
    CHECK (status IN ('pending', 'succeeded', 'failed', 'skipped'));
ALTER TABLE deliveries DROP COLUMN deliver_at;
ALTER TABLE events DROP COLUMN deliver_at;
