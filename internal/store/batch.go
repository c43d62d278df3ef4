package store

// batchColumns are the two columns of a Batch as scanned: both NULL (a
// constraint keeps them so) for none.
type batchColumns struct {
	maxSize, maxWaitMS *int
}

func (b batchColumns) value() *Batch {
	if b.maxSize == nil || b.maxWaitMS == nil {
		return nil
	}
	return &Batch{MaxSize: *b.maxSize, MaxWaitMS: *b.maxWaitMS}
}

// batchSize and batchWait are a Batch's column values, nil for none.
func batchSize(b *Batch) *int {
	if b == nil {
		return nil
	}
	return &b.MaxSize
}

func batchWait(b *Batch) *int {
	if b == nil {
		return nil
	}
	return &b.MaxWaitMS
}
