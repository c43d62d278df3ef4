-- +goose Up

-- The operational events already sent about a subscription
-- (docs/events.md, Operational events), one row per subscription and
-- kind: claiming a row is what keeps a flapping endpoint to one event per
-- state change, and a failing one to one webhook_delivery.exhausted per
-- interval, across every worker. key tells one episode from the next (the
-- token_failing episode's start), empty when the kind has none.
CREATE TABLE operational_claims (
	subscription_id uuid NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
	kind text NOT NULL,
	key text NOT NULL DEFAULT '',
	claimed_at timestamptz NOT NULL,
	PRIMARY KEY (subscription_id, kind)
);

-- +goose Down
DROP TABLE operational_claims;
