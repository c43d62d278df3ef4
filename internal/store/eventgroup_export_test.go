package store

import "context"

// CreateEventsOneStatementEach writes a group with one createEventSQL
// statement per event, as CreateEvents does for a group that is not all
// fan-outs: the reference createFanOutsSQL is checked against.
func (s *Events) CreateEventsOneStatementEach(ctx context.Context, writes []EventWrite, group []byte) ([]EventWritten, error) {
	return s.createEventsPipelined(ctx, writes, group)
}
