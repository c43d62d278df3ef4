-- +goose Up

-- Erasure and retention (docs/erasure.md).
--
-- erasures records each event whose content was erased on a data
-- subject's request: when, and what the erasure replaced, so that erasing
-- again answers the same. It outlives the event's partitions on purpose:
-- it holds no content, only the proof that content was removed.
CREATE TABLE erasures (
    event_id         uuid PRIMARY KEY,
    merchant_id      text NOT NULL,
    erased_at        timestamptz NOT NULL,
    deliveries       integer NOT NULL,
    deliveries_ended integer NOT NULL,
    attempts         integer NOT NULL
);

-- A delivery that was still waiting when its event was erased ends as
-- 'erased' and is never attempted. The check is extended, not rewritten,
-- so that statuses added by other migrations stay allowed.
-- +goose StatementBegin
DO $$
DECLARE def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'deliveries'::regclass AND conname = 'deliveries_status_check';
    IF def IS NOT NULL AND position('erased' IN def) = 0 THEN
        ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
        EXECUTE format('ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check CHECK ((%s) OR status = %L)',
            substring(def FROM '^CHECK \((.*)\)$'), 'erased');
    END IF;
END $$;
-- +goose StatementEnd

-- A merchant's retention in days: its events, deliveries, attempts and
-- attempt stats older than this are deleted (in bounded batches) by the
-- maintenance job, ahead of the engine's 30-day partition drop.
ALTER TABLE merchants ADD COLUMN retention_days integer NOT NULL DEFAULT 30
    CHECK (retention_days BETWEEN 1 AND 30);
-- The merchants whose retention is shorter than the engine's: the only
-- ones the maintenance job visits.
CREATE INDEX merchants_short_retention_idx ON merchants (id) WHERE retention_days < 30;

-- The audit trail of erasures and retention changes: who (the internal
-- caller, or a merchant's API key id), what, on what, when. Read through
-- GET /internal/v1/audit, newest first.
CREATE TABLE audit_entries (
    id          uuid PRIMARY KEY,
    merchant_id text NOT NULL,
    actor       text NOT NULL,
    action      text NOT NULL,
    target      text NOT NULL,
    details     jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL
);
CREATE INDEX audit_entries_merchant_idx ON audit_entries (merchant_id, created_at DESC, id DESC);

-- +goose Down
DROP TABLE audit_entries;
DROP INDEX merchants_short_retention_idx;
ALTER TABLE merchants DROP COLUMN retention_days;
DELETE FROM deliveries WHERE status = 'erased';
-- +goose StatementBegin
DO $$
DECLARE def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'deliveries'::regclass AND conname = 'deliveries_status_check';
    ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
    EXECUTE format('ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check CHECK (%s)',
        replace(substring(def FROM '^CHECK \((.*)\)$'), ' OR (status = ''erased''::text)', ''));
END $$;
-- +goose StatementEnd
DROP TABLE erasures;
