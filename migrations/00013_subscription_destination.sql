-- +goose Up

-- Where a subscription's deliveries go when it is not an HTTP endpoint
-- (issue 27): destination_sealed is the whole destination the merchant
-- gave (its type, the broker's address and every credential) as JSON,
-- sealed with the master key like the signing secrets; destination is its
-- public summary, what reads show (the type and the fields, credentials
-- masked). Both NULL: an HTTP endpoint, delivered to url. For a broker
-- destination url holds the destination's target, without credentials,
-- for the lists and the portal.
ALTER TABLE subscriptions ADD COLUMN destination_sealed bytea;
ALTER TABLE subscriptions ADD COLUMN destination jsonb;
ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_destination_check
    CHECK ((destination_sealed IS NULL) = (destination IS NULL));

-- +goose Down
ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_destination_check;
ALTER TABLE subscriptions DROP COLUMN destination;
ALTER TABLE subscriptions DROP COLUMN destination_sealed;
