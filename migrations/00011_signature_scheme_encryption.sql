-- +goose Up

-- Ed25519 signatures and encrypted payloads (issue 26).
-- signature_scheme is how the subscription's deliveries are signed,
-- chosen at its creation: hmac_sha256 ("whsec_" secrets, "v1,"
-- signatures) or ed25519 ("whsk_" private keys, "v1a," signatures). Each
-- ed25519 secret keeps its "whpk_" public key beside it, in clear (it is
-- not a secret), so that reads show it without opening the sealed key.
-- encryption_key is the merchant's public JWK the deliveries' bodies are
-- encrypted to (a compact JWE); NULL: bodies are sent in clear.
ALTER TABLE subscriptions ADD COLUMN signature_scheme text NOT NULL DEFAULT 'hmac_sha256'
    CONSTRAINT subscriptions_signature_scheme_check CHECK (signature_scheme IN ('hmac_sha256', 'ed25519'));
ALTER TABLE subscriptions ADD COLUMN encryption_key jsonb;
ALTER TABLE subscription_secrets ADD COLUMN public_key text;

-- +goose Down
ALTER TABLE subscription_secrets DROP COLUMN public_key;
ALTER TABLE subscriptions DROP COLUMN encryption_key;
ALTER TABLE subscriptions DROP COLUMN signature_scheme;
