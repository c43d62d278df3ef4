-- +goose Up

-- Poll subscriptions (issue 28): a subscription whose destination is
-- {"type": "poll"} is never dialled; the merchant reads its deliveries
-- with GET /v1/webhook_subscriptions/{id}/poll.
--
-- poll_position places a poll delivery in its subscription's line: the
-- fan-out gives it poll_lines.last + 1 under that row's lock, so positions
-- commit in the order they are given and a reader that sees position n
-- already sees every position below it. That is what lets an iterator (a
-- position) acknowledge "everything before it" without ever skipping a
-- delivery committed late. NULL for every other delivery, and for a poll
-- delivery skipped while its subscription was disabled.
ALTER TABLE deliveries ADD COLUMN poll_position bigint;
CREATE INDEX deliveries_poll_idx ON deliveries (subscription_id, poll_position)
    WHERE poll_position IS NOT NULL;

-- last is the position given to a poll subscription's newest delivery;
-- written by the fan-out alone, so that readers never hold up publishes.
CREATE TABLE poll_lines (
    subscription_id uuid PRIMARY KEY,
    last            bigint NOT NULL
);

-- What the merchant has read: every position up to acked is acknowledged
-- (its delivery succeeded), read_at is the last read. Written by readers
-- alone.
CREATE TABLE poll_reads (
    subscription_id uuid PRIMARY KEY,
    acked           bigint NOT NULL DEFAULT 0,
    read_at         timestamptz
);

-- An acknowledged poll delivery records one attempt whose trigger is poll.
ALTER TABLE attempts DROP CONSTRAINT attempts_trigger_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_trigger_check
    CHECK (trigger IN ('scheduled', 'manual', 'poll'));

-- +goose Down
DELETE FROM attempts WHERE trigger = 'poll';
ALTER TABLE attempts DROP CONSTRAINT attempts_trigger_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_trigger_check
    CHECK (trigger IN ('scheduled', 'manual'));
DROP TABLE poll_reads;
DROP TABLE poll_lines;
DROP INDEX deliveries_poll_idx;
ALTER TABLE deliveries DROP COLUMN poll_position;
