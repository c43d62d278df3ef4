-- +goose Up

-- An API key's lifecycle. prefix is the part of the key an operator may
-- see (the environment's prefix and the first characters of the random
-- part): enough to recognise a key, too little to use it. Keys issued
-- before this migration have none (NULL): only their hash was ever kept.
-- revoked_at ends a key at once; expires_at ends a rolled key once its
-- overlap is over. last_used_at is written in batches, at most once a
-- minute per key, never on the request path.
ALTER TABLE api_keys ADD COLUMN prefix text;
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;
ALTER TABLE api_keys ADD COLUMN revoked_at timestamptz;
CREATE INDEX api_keys_merchant_idx ON api_keys (merchant_id, created_at);

-- +goose Down
DROP INDEX api_keys_merchant_idx;
ALTER TABLE api_keys DROP COLUMN revoked_at;
ALTER TABLE api_keys DROP COLUMN expires_at;
ALTER TABLE api_keys DROP COLUMN last_used_at;
ALTER TABLE api_keys DROP COLUMN prefix;
