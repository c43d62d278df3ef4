-- +goose Up

-- A portal session lets a merchant's staff use the hosted portal without an
-- API key: the core API mints one and hands its link to the merchant. Like
-- API keys, only the SHA-256 of the token is kept; the token is shown once.
-- A session ends at expires_at, or earlier when revoked (sign out, or the
-- core API ending every session of a merchant).
CREATE TABLE portal_sessions (
    id           uuid PRIMARY KEY,
    merchant_id  text NOT NULL REFERENCES merchants (id),
    environment  text NOT NULL CHECK (environment IN ('sandbox', 'production')),
    token_hash   bytea NOT NULL UNIQUE,
    capabilities text[] NOT NULL,
    -- Branding of this session; NULL falls back to the merchant's settings.
    accent_color text,
    logo_url     text,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz
);
-- Ending every session of a merchant reads only that merchant's live ones.
CREATE INDEX portal_sessions_merchant_idx ON portal_sessions (merchant_id) WHERE revoked_at IS NULL;

-- The portal's default branding, set with the merchant's other settings.
ALTER TABLE merchants ADD COLUMN portal_accent_color text;
ALTER TABLE merchants ADD COLUMN portal_logo_url text;

-- An endpoint's health over the last 24 hours counts the attempts made to
-- it since then. Every recorded attempt moves its delivery's updated_at, so
-- the deliveries attempted since an instant are those updated since: this
-- index finds them without reading the subscription's older deliveries.
-- Test deliveries never count towards health and stay out of it.
CREATE INDEX deliveries_subscription_updated_idx ON deliveries (subscription_id, updated_at) WHERE NOT test;

-- +goose Down
DROP INDEX deliveries_subscription_updated_idx;
ALTER TABLE merchants DROP COLUMN portal_logo_url;
ALTER TABLE merchants DROP COLUMN portal_accent_color;
DROP TABLE portal_sessions;
