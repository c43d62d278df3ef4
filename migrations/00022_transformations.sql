-- +goose Up

-- A subscription's transformation (docs/transformations.md): the merchant's
-- JavaScript handler that reshapes each delivery before it is sent.
-- transformation_code is NULL for none; transformation_version counts the
-- code's changes (1 for the first), so that a compiled program is cached
-- per version and each attempt records which version ran.
-- transformation_enabled turns it off without losing the code.
ALTER TABLE subscriptions ADD COLUMN transformation_code text
    CHECK (octet_length(transformation_code) <= 65536);
ALTER TABLE subscriptions ADD COLUMN transformation_enabled boolean NOT NULL DEFAULT false;
ALTER TABLE subscriptions ADD COLUMN transformation_version int NOT NULL DEFAULT 0;
ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_transformation_check
    CHECK (transformation_code IS NOT NULL OR NOT transformation_enabled);
-- The transformation version an attempt ran (NULL: none ran). An attempt
-- the transformation cancelled is 'skipped': nothing was sent, and it
-- counts neither as a success nor as a failure of the endpoint.
ALTER TABLE attempts ADD COLUMN transformation_version int;
-- The body a transformed attempt sent (the handler's payload), which the
-- event's envelope no longer tells; NULL for an attempt not transformed.
ALTER TABLE attempts ADD COLUMN request_body text;
ALTER TABLE attempts DROP CONSTRAINT attempts_status_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_status_check CHECK (status IN ('succeeded', 'failed', 'skipped'));

-- +goose Down
DELETE FROM attempts WHERE status = 'skipped';
ALTER TABLE attempts DROP CONSTRAINT attempts_status_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_status_check CHECK (status IN ('succeeded', 'failed'));
ALTER TABLE attempts DROP COLUMN request_body;
ALTER TABLE attempts DROP COLUMN transformation_version;
ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_transformation_check;
ALTER TABLE subscriptions DROP COLUMN transformation_version;
ALTER TABLE subscriptions DROP COLUMN transformation_enabled;
ALTER TABLE subscriptions DROP COLUMN transformation_code;
