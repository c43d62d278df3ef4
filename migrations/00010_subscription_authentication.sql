-- +goose Up

-- How deliveries prove themselves to the endpoint beyond the signature
-- (issue 26): authentication_sealed is the whole authentication the
-- merchant gave (its type and every secret, a client key say) as JSON,
-- sealed with the master key like the signing secrets; authentication is
-- its public summary, what reads show (the type, and for mtls the client
-- certificate's subject, issuer, serial and not_after). Both NULL: the
-- deliveries carry only the signature.
ALTER TABLE subscriptions ADD COLUMN authentication_sealed bytea;
ALTER TABLE subscriptions ADD COLUMN authentication jsonb;
ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_authentication_check
    CHECK ((authentication_sealed IS NULL) = (authentication IS NULL));

-- +goose Down
ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_authentication_check;
ALTER TABLE subscriptions DROP COLUMN authentication;
ALTER TABLE subscriptions DROP COLUMN authentication_sealed;
