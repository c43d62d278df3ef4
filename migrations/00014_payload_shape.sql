-- +goose Up

-- The shape of a subscription's deliveries (issue 28): payload_style
-- "thin" sends the envelope with a reference to the event's object in place
-- of its payload (the merchant reads the event through the API), "full"
-- the stored envelope as it is. batch_max_size and batch_max_wait_ms put up
-- to batch_max_size due deliveries, gathered for at most batch_max_wait_ms,
-- in one request; both NULL (a constraint keeps them so) for one delivery
-- per request.
ALTER TABLE subscriptions ADD COLUMN payload_style text NOT NULL DEFAULT 'full'
    CHECK (payload_style IN ('full', 'thin'));
ALTER TABLE subscriptions ADD COLUMN batch_max_size int
    CHECK (batch_max_size BETWEEN 1 AND 100);
ALTER TABLE subscriptions ADD COLUMN batch_max_wait_ms int
    CHECK (batch_max_wait_ms BETWEEN 0 AND 10000);
ALTER TABLE subscriptions ADD CONSTRAINT subscriptions_batch_check
    CHECK ((batch_max_size IS NULL) = (batch_max_wait_ms IS NULL));
-- The request an attempt went in with others (batch_…, its webhook-id);
-- NULL for an attempt sent alone.
ALTER TABLE attempts ADD COLUMN batch_id text;

-- +goose Down
ALTER TABLE attempts DROP COLUMN batch_id;
ALTER TABLE subscriptions DROP CONSTRAINT subscriptions_batch_check;
ALTER TABLE subscriptions DROP COLUMN batch_max_wait_ms;
ALTER TABLE subscriptions DROP COLUMN batch_max_size;
ALTER TABLE subscriptions DROP COLUMN payload_style;
