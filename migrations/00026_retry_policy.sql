-- +goose Up

-- A subscription's own retry policy (docs/delivery-controls.md): the
-- delays between its deliveries' attempts, in seconds, and the timeout of
-- one attempt, {"schedule": [5, 60, …], "timeout_seconds": 10}; either
-- member null or absent means the engine's. NULL: the engine's schedule and
-- timeout. Package subscriptions checks it before it is stored.
ALTER TABLE subscriptions ADD COLUMN retry_policy jsonb;
-- The policy a delivery keeps: the lease of its first attempt copies its
-- subscription's (or {} for the engine's) and every later attempt reads
-- this one, so that an update of the subscription applies to deliveries
-- not yet attempted and never reshapes one under way. NULL: not attempted
-- yet. Adding a nullable column without a default rewrites no partition.
ALTER TABLE deliveries ADD COLUMN retry_policy jsonb;

-- +goose Down
ALTER TABLE deliveries DROP COLUMN retry_policy;
ALTER TABLE subscriptions DROP COLUMN retry_policy;
