-- +goose Up

-- filter is a subscription's filter expression (CEL), checked when it is
-- set; NULL delivers every event of the subscribed types. headers_sealed
-- holds the extra request headers, sealed with the master key like the
-- signing secrets; NULL sends none. failing_since is when the current run
-- of failed attempts began (NULL after a success): the auto-disable job
-- reads it.
ALTER TABLE subscriptions ADD COLUMN filter text;
ALTER TABLE subscriptions ADD COLUMN headers_sealed bytea;
ALTER TABLE subscriptions ADD COLUMN failing_since timestamptz;
CREATE INDEX subscriptions_failing_idx ON subscriptions (failing_since)
    WHERE status = 'enabled' AND deleted_at IS NULL AND failing_since IS NOT NULL;

-- An event that matches a disabled subscription is kept as a skipped
-- delivery (no attempt), which recover replays once the endpoint is enabled.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check
    CHECK (status IN ('pending', 'succeeded', 'failed', 'skipped'));

-- +goose Down
DELETE FROM deliveries WHERE status = 'skipped';
ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check
    CHECK (status IN ('pending', 'succeeded', 'failed'));
DROP INDEX subscriptions_failing_idx;
ALTER TABLE subscriptions DROP COLUMN failing_since;
ALTER TABLE subscriptions DROP COLUMN headers_sealed;
ALTER TABLE subscriptions DROP COLUMN filter;
