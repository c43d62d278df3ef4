-- +goose Up

-- Traces (docs/tracing.md). events.traceparent is the W3C traceparent of
-- the span that published the event, kept with it so that every attempt
-- of its deliveries, however much later and on whichever worker, is a
-- span of the event's trace; NULL when tracing was off. A column
-- added without a default rewrites nothing.
ALTER TABLE events ADD COLUMN traceparent text;

-- subscriptions.trace_context: whether deliveries carry a traceparent
-- header continuing the trace into the merchant's system (on unless the
-- merchant turned it off).
ALTER TABLE subscriptions ADD COLUMN trace_context boolean NOT NULL DEFAULT true;

-- +goose Down
ALTER TABLE subscriptions DROP COLUMN trace_context;
ALTER TABLE events DROP COLUMN traceparent;
