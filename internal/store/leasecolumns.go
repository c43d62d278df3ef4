package store

import "time"

// leasedSubscriptionColumns are what an attempt needs of its subscription,
// read where its delivery is leased: by the workers' lease (leaseSQL) and
// by the publish that leases its own first attempts (createEventSQL). s
// is the subscription.
const leasedSubscriptionColumns = `s.url, s.status, s.deleted_at IS NOT NULL, s.updated_at, s.kind,
	coalesce(s.rate_limit, 0), s.headers_sealed, s.authentication_sealed, coalesce(s.authentication->>'type', ''),
	s.encryption_key, s.trace_context, s.payload_style, s.batch_max_size, s.batch_max_wait_ms, s.destination_sealed,
	` + leasedTransformation

// leasedSubscription holds leasedSubscriptionColumns as scanned. Each may
// be NULL: the publish reads them only for the deliveries it leased.
type leasedSubscription struct {
	url, status, kind, authType, payloadStyle *string
	deleted, traceContext                     *bool
	version                                   *time.Time
	rateLimit, transformation                 *int
	headers, authentication, encryptionKey    []byte
	destination                               []byte
	batch                                     batchColumns
}

// targets are the scan targets, in leasedSubscriptionColumns' order.
func (c *leasedSubscription) targets() []any {
	return []any{&c.url, &c.status, &c.deleted, &c.version, &c.kind,
		&c.rateLimit, &c.headers, &c.authentication, &c.authType,
		&c.encryptionKey, &c.traceContext, &c.payloadStyle, &c.batch.maxSize, &c.batch.maxWaitMS, &c.destination,
		&c.transformation}
}

// fill writes what was scanned into l.
func (c *leasedSubscription) fill(l *LeasedDelivery) {
	l.URL = deref(c.url)
	l.SubscriptionStatus = SubscriptionStatus(deref(c.status))
	l.SubscriptionDeleted = deref(c.deleted)
	l.SubscriptionVersion = deref(c.version)
	l.Kind = SubscriptionKind(deref(c.kind))
	l.RateLimit = deref(c.rateLimit)
	l.SealedHeaders, l.SealedAuthentication = c.headers, c.authentication
	l.AuthenticationType = deref(c.authType)
	l.EncryptionKey = c.encryptionKey
	l.TraceContext = deref(c.traceContext)
	l.PayloadStyle = deref(c.payloadStyle)
	l.Batch = c.batch.value()
	l.SealedDestination = c.destination
	l.TransformationVersion = c.transformation
}
