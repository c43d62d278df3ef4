-- +goose Up

-- Delivery controls of a subscription. rate_limit caps its deliveries per
-- second (NULL: no cap). ordering_key is the dotted path into the envelope
-- whose value orders its deliveries (NULL: no ordering).
ALTER TABLE subscriptions ADD COLUMN rate_limit integer CHECK (rate_limit BETWEEN 1 AND 10000);
ALTER TABLE subscriptions ADD COLUMN ordering_key text;

-- An ordered delivery carries the value of its subscription's key and its
-- place in that key's line, counted 1, 2, 3... in publish order. Both stay
-- NULL for every other delivery.
ALTER TABLE deliveries ADD COLUMN ordering_key text;
ALTER TABLE deliveries ADD COLUMN sequence bigint;

-- Finding the next delivery of a key reads only the pending ordered ones.
CREATE INDEX deliveries_ordering_idx ON deliveries (subscription_id, ordering_key, sequence)
    WHERE status = 'pending' AND sequence IS NOT NULL;

-- One row per (subscription, key value): last is the last sequence given
-- at fan-out, head the one delivery of the key that may be attempted (the
-- lowest pending one; last+1 while none is pending). Fan-out and the end of
-- a head both take this row's lock, which orders them.
CREATE TABLE ordering_keys (
    subscription_id uuid NOT NULL,
    key             text NOT NULL,
    last            bigint NOT NULL,
    head            bigint NOT NULL,
    PRIMARY KEY (subscription_id, key)
);

-- +goose Down
DROP TABLE ordering_keys;
DROP INDEX deliveries_ordering_idx;
ALTER TABLE deliveries DROP COLUMN sequence;
ALTER TABLE deliveries DROP COLUMN ordering_key;
ALTER TABLE subscriptions DROP COLUMN ordering_key;
ALTER TABLE subscriptions DROP COLUMN rate_limit;
