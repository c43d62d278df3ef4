-- +goose Up
-- Deliveries' day partitions leave a fifth of each page free, so that the
-- lease's update (lease_until only) stays on the row's page as a HOT update
-- and writes no index entry; the maintainer creates new partitions with the
-- same setting (internal/store/partitions.go). Existing partitions take it
-- for the pages they fill from now on.
-- +goose StatementBegin
DO $$
DECLARE p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'deliveries'::regclass LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 80)', p);
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'deliveries'::regclass LOOP
        EXECUTE format('ALTER TABLE %s RESET (fillfactor)', p);
    END LOOP;
END $$;
-- +goose StatementEnd
