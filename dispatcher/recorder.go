package dispatcher

import (
	"context"

	"github.com/webhookd/webhookd/store"
)

// batchRecorder is the group commit of attempt records: a record is
// acknowledged only once its batch has committed, so the durability of
// store.RecordAttempt is kept (the task is still acknowledged after its
// attempt is in Postgres) at a fraction of the commits.
type batchRecorder struct {
	b *batcher[store.AttemptRecord, struct{}]
}

func newBatchRecorder(st *store.Store) *batchRecorder {
	return &batchRecorder{b: newBatcher(func(ctx context.Context, recs []store.AttemptRecord) ([]struct{}, []error, error) {
		errs, err := st.RecordAttempts(ctx, recs)
		return make([]struct{}, len(recs)), errs, err
	})}
}

// RecordAttempt queues the record and waits until its batch committed.
func (r *batchRecorder) RecordAttempt(ctx context.Context, rec store.AttemptRecord) error {
	_, err := r.b.do(ctx, rec)
	return err
}

func (r *batchRecorder) close() { r.b.close() }
