-- +goose Up

-- A listener is a subscription that `webhookd listen` holds open over a
-- WebSocket: its deliveries are relayed down that connection, never dialled.
-- It lives while its connection sends heartbeats, which push expires_at
-- forward; once expires_at has passed it is ended (deleted_at set and its
-- pending deliveries failed). Listeners are not shown by the subscription
-- routes and do not count against a merchant's cap of subscriptions.
ALTER TABLE subscriptions ADD COLUMN kind text NOT NULL DEFAULT 'endpoint'
    CHECK (kind IN ('endpoint', 'listener'));
ALTER TABLE subscriptions ADD COLUMN expires_at timestamptz;
CREATE INDEX subscriptions_listener_expiry_idx ON subscriptions (expires_at)
    WHERE kind = 'listener' AND deleted_at IS NULL;

-- +goose Down
DROP INDEX subscriptions_listener_expiry_idx;
ALTER TABLE subscriptions DROP COLUMN expires_at;
ALTER TABLE subscriptions DROP COLUMN kind;
