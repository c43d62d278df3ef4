-- +goose Up

-- Merchants are owned by the core API; webhookd keeps only what it needs:
-- the pinned api version (spec 9.2) and where failure e-mails go.
CREATE TABLE merchants (
    id                 text PRIMARY KEY,
    api_version        text NOT NULL,
    notification_email text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

-- API keys are stored as SHA-256 hashes of the whole key string; the key
-- itself is shown once, when it is made.
CREATE TABLE api_keys (
    id          uuid PRIMARY KEY,
    merchant_id text NOT NULL REFERENCES merchants (id),
    environment text NOT NULL CHECK (environment IN ('sandbox', 'production')),
    key_hash    bytea NOT NULL UNIQUE,
    scopes      text[] NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE subscriptions (
    id                   uuid PRIMARY KEY,
    merchant_id          text NOT NULL REFERENCES merchants (id),
    url                  text NOT NULL,
    events               text[] NOT NULL,
    description          text,
    status               text NOT NULL CHECK (status IN ('enabled', 'disabled')),
    metadata             jsonb NOT NULL DEFAULT '{}',
    consecutive_failures integer NOT NULL DEFAULT 0,
    last_success_at      timestamptz,
    last_failure_at      timestamptz,
    last_notified_at     timestamptz,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    -- Deleted subscriptions stay (their deliveries still name them) but are
    -- invisible to the API and receive nothing.
    deleted_at           timestamptz
);
CREATE INDEX subscriptions_merchant_idx ON subscriptions (merchant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;

-- Signing secrets, encrypted with the master key. Which of them are active at
-- an instant is decided by the signer package from created_at/expires_at.
CREATE TABLE subscription_secrets (
    id              bigserial PRIMARY KEY,
    subscription_id uuid NOT NULL REFERENCES subscriptions (id),
    ciphertext      bytea NOT NULL,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz
);
CREATE INDEX subscription_secrets_sub_idx ON subscription_secrets (subscription_id, created_at DESC);

-- Event ids are unique across partitions; a partitioned table cannot enforce
-- that, so this narrow table does (and makes publishing idempotent).
CREATE TABLE event_ids (
    id         uuid PRIMARY KEY,
    created_at timestamptz NOT NULL
);
CREATE INDEX event_ids_created_idx ON event_ids USING brin (created_at);

-- body holds the exact envelope bytes that are delivered (spec 9.6): they are
-- never re-serialised.
CREATE TABLE events (
    id          uuid NOT NULL,
    merchant_id text NOT NULL,
    type        text NOT NULL,
    api_version text NOT NULL,
    body        bytea NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX events_merchant_idx ON events (merchant_id, created_at DESC, id DESC);

-- Delivery ids are UUIDv7 whose timestamp is created_at, so a lookup by id
-- prunes to one partition.
CREATE TABLE deliveries (
    id               uuid NOT NULL,
    merchant_id      text NOT NULL,
    event_id         uuid NOT NULL,
    event_created_at timestamptz NOT NULL,
    event_type       text NOT NULL,
    subscription_id  uuid NOT NULL,
    status           text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    test             boolean NOT NULL DEFAULT false,
    attempt_count    integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz,
    -- A worker holds the lease while an attempt runs; another worker with the
    -- same task waits for it to end or expire.
    lease_until      timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX deliveries_merchant_idx ON deliveries (merchant_id, created_at DESC, id DESC);
CREATE INDEX deliveries_event_idx ON deliveries (event_id);
CREATE INDEX deliveries_due_idx ON deliveries (next_attempt_at) WHERE status = 'pending';

-- Attempts live in the partition of their delivery's day, so a delivery and
-- its attempts are dropped together.
CREATE TABLE attempts (
    delivery_id         uuid NOT NULL,
    delivery_created_at timestamptz NOT NULL,
    number              integer NOT NULL,
    status              text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    trigger             text NOT NULL CHECK (trigger IN ('scheduled', 'manual')),
    http_status         integer,
    error               text,
    duration_ms         integer NOT NULL,
    response_body       text NOT NULL DEFAULT '',
    attempted_at        timestamptz NOT NULL,
    PRIMARY KEY (delivery_id, number, delivery_created_at)
) PARTITION BY RANGE (delivery_created_at);

-- Idempotency keys (spec 4.4): scoped to the merchant, global across routes.
CREATE TABLE idempotency_keys (
    merchant_id     text NOT NULL,
    key             text NOT NULL,
    request_hash    bytea NOT NULL,
    -- NULL while the first request with this key is being processed.
    response_status integer,
    response_header jsonb,
    response_body   bytea,
    locked_until    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys USING brin (created_at);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE attempts;
DROP TABLE deliveries;
DROP TABLE events;
DROP TABLE event_ids;
DROP TABLE subscription_secrets;
DROP TABLE subscriptions;
DROP TABLE api_keys;
DROP TABLE merchants;
