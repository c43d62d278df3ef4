-- +goose Up

-- What an API key opened ends with it. api_key_id names the key that
-- minted a portal session (POST /v1/portal_sessions) or opened a listener
-- (`webhookd listen`): once that key is revoked, or its roll's overlap is
-- over, the session is refused and the listener ends. NULL for a session
-- the core API minted with the ingest token (it belongs to no key), and
-- for sessions and listeners made before this migration.
ALTER TABLE portal_sessions ADD COLUMN api_key_id uuid REFERENCES api_keys (id);
ALTER TABLE subscriptions ADD COLUMN api_key_id uuid REFERENCES api_keys (id);
-- Ending what a key opened reads only its live sessions and listeners.
CREATE INDEX portal_sessions_api_key_idx ON portal_sessions (api_key_id)
    WHERE api_key_id IS NOT NULL AND revoked_at IS NULL;
CREATE INDEX subscriptions_api_key_idx ON subscriptions (api_key_id)
    WHERE api_key_id IS NOT NULL AND deleted_at IS NULL;

-- +goose Down
DROP INDEX subscriptions_api_key_idx;
DROP INDEX portal_sessions_api_key_idx;
ALTER TABLE subscriptions DROP COLUMN api_key_id;
ALTER TABLE portal_sessions DROP COLUMN api_key_id;
