-- +goose Up

-- A bulk replay (POST /v1/webhook_deliveries/replay): one manual attempt
-- for each of a merchant's deliveries in a time window that its filters
-- select. The filters are kept as asked; the replay job pages through the
-- window after cursor (created_at, id of the last delivery it passed), so
-- that a restart resumes where the last committed page ended and never
-- requests a delivery twice. matched is the bounded count made when the
-- replay was asked for; the other counts follow the attempts.
CREATE TABLE replays (
    id                uuid PRIMARY KEY,
    merchant_id       text NOT NULL,
    since             timestamptz NOT NULL,
    until             timestamptz NOT NULL,
    subscription_id   uuid,
    event_type        text,
    status            text CHECK (status IN ('failed', 'skipped', 'succeeded')),
    http_status_class text CHECK (http_status_class IN ('4xx', '5xx', 'none')),
    matched           integer NOT NULL,
    requested         integer NOT NULL DEFAULT 0,
    attempted         integer NOT NULL DEFAULT 0,
    succeeded         integer NOT NULL DEFAULT 0,
    failed            integer NOT NULL DEFAULT 0,
    cursor_created_at timestamptz,
    cursor_id         uuid,
    -- paged: the cursor reached until; the replay completes once every
    -- requested attempt has been made (or dropped).
    paged             boolean NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    completed_at      timestamptz
);
-- One replay at a time per merchant: a second while one runs is refused
-- by this index (409).
CREATE UNIQUE INDEX replays_running_idx ON replays (merchant_id) WHERE completed_at IS NULL;
CREATE INDEX replays_created_idx ON replays (created_at);
CREATE INDEX replays_running_updated_idx ON replays (updated_at) WHERE completed_at IS NULL;

-- The deliveries a replay requested, one row each (the primary key makes
-- a delivery requested at most once per replay). after_number is the
-- delivery's attempt count when it was requested: the replay's attempt is
-- its first manual attempt numbered above it, written here once it is
-- recorded (attempt_number, outcome). Marking attempts here, not on the
-- attempts table, leaves the record of every attempt as it was.
CREATE TABLE replay_items (
    replay_id           uuid NOT NULL REFERENCES replays (id) ON DELETE CASCADE,
    delivery_id         uuid NOT NULL,
    delivery_created_at timestamptz NOT NULL,
    after_number        integer NOT NULL,
    requested_at        timestamptz NOT NULL,
    attempt_number      integer,
    outcome             text CHECK (outcome IN ('succeeded', 'failed', 'dropped')),
    PRIMARY KEY (replay_id, delivery_id)
);
CREATE INDEX replay_items_open_idx ON replay_items (replay_id) WHERE outcome IS NULL;

-- +goose Down
DROP TABLE replay_items;
DROP TABLE replays;
