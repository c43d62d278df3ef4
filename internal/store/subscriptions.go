package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/webhookd/webhookd/signer"
)

// Subscriptions owns the merchant's endpoints (the subscriptions rows of
// kind endpoint) and the signing secrets of every subscription: create,
// read, list, update, delete, and the rotation of secrets.
type Subscriptions struct {
	db
}

// NewSubscription is what a merchant asks for when creating a subscription.
// The store does not validate it: package subscriptions does, before calling.
type NewSubscription struct {
	MerchantID  string
	URL         string
	Events      []string
	Description *string
	Metadata    map[string]string
	// RateLimit and OrderingKey are the delivery controls; nil: none.
	RateLimit   *int
	OrderingKey *string
	// Filter is the checked filter expression; nil for none.
	Filter *string
	// SealedHeaders are the sealed extra headers; nil for none.
	SealedHeaders []byte
	// Authentication is the checked endpoint authentication; nil for none.
	Authentication *Authentication
	// SignatureScheme is SchemeHMACSHA256 ("" too) or SchemeEd25519;
	// SigningPublicKey is the first secret's public key (ed25519 only).
	SignatureScheme  string
	SigningPublicKey *string
	// EncryptionKey is the checked public JWK bodies are encrypted to;
	// nil for none.
	EncryptionKey []byte
	// TraceContext turns the deliveries' traceparent header on or off;
	// nil: on.
	TraceContext *bool
	// PayloadStyle is PayloadFull or PayloadThin ("" is full); Batch nil
	// for none.
	PayloadStyle string
	Batch        *Batch
	// Destination is the checked broker destination; nil for an HTTP
	// endpoint (URL).
	Destination *Destination
	// Transformation is the checked transformation (its Version is
	// ignored: the first is 1); nil for none.
	Transformation *Transformation
	// RetryPolicy is the checked retry policy; nil for the engine's.
	RetryPolicy *RetryPolicy
	// Limit, when positive, is how many subscriptions the merchant may hold
	// (every one not deleted, whichever surface made it): the create fails
	// with ErrSubscriptionLimit when the merchant already holds Limit.
	Limit int
}

// ErrSubscriptionLimit reports a create refused because the merchant
// already holds NewSubscription.Limit subscriptions.
var ErrSubscriptionLimit = errors.New("subscription limit reached")

// SubscriptionUpdate is a partial update: nil fields are left as they are.
type SubscriptionUpdate struct {
	URL    *string
	Events []string
	// SetDescription says whether Description is applied; a nil Description
	// with SetDescription clears it.
	SetDescription bool
	Description    *string
	Status         *SubscriptionStatus
	// Metadata replaces the whole map when non-nil.
	Metadata map[string]string
	// SetRateLimit says whether RateLimit is applied (nil clears it);
	// SetOrderingKey the same for OrderingKey.
	SetRateLimit   bool
	RateLimit      *int
	SetOrderingKey bool
	OrderingKey    *string
	// SetFilter says whether Filter is applied; a nil Filter clears it.
	SetFilter bool
	Filter    *string
	// SetHeaders says whether SealedHeaders is applied (replacing every
	// header); a nil SealedHeaders clears them.
	SetHeaders    bool
	SealedHeaders []byte
	// SetAuthentication says whether Authentication is applied (replacing
	// the whole of it); a nil Authentication removes it.
	SetAuthentication bool
	Authentication    *Authentication
	// SetEncryptionKey says whether EncryptionKey is applied; a nil
	// EncryptionKey removes it.
	SetEncryptionKey bool
	EncryptionKey    []byte
	// TraceContext, when not nil, turns the traceparent header on or off.
	TraceContext *bool
	// PayloadStyle, when not nil, replaces the payload style.
	PayloadStyle *string
	// SetBatch says whether Batch is applied; a nil Batch removes it.
	SetBatch bool
	Batch    *Batch
	// SetDestination says whether Destination is applied (replacing the
	// whole of it); a nil Destination makes it an HTTP endpoint again.
	SetDestination bool
	Destination    *Destination
	// SetTransformation says whether Transformation is applied; a nil
	// Transformation removes it. Its Version is ignored: the stored one
	// counts up when the code changes.
	SetTransformation bool
	Transformation    *Transformation
	// SetRetryPolicy says whether RetryPolicy is applied; a nil
	// RetryPolicy returns to the engine's. Deliveries already attempted
	// keep the policy they have.
	SetRetryPolicy bool
	RetryPolicy    *RetryPolicy
}

// SubscriptionFilter narrows a subscription list.
type SubscriptionFilter struct {
	// Status, when not empty, keeps only subscriptions in that status.
	Status SubscriptionStatus
}

// Secret is a stored signing secret, still sealed. The dispatcher opens it
// with the master key and lets signer.Active pick the ones that sign.
type Secret struct {
	ID         int64
	Ciphertext []byte
	CreatedAt  time.Time
	ExpiresAt  *time.Time
}

// subscriptionColumns is the select list that scanSubscription reads.
const subscriptionColumns = `id, merchant_id, url, events, description, status, metadata,
	consecutive_failures, last_success_at, last_failure_at, created_at, updated_at, rate_limit, ordering_key,
	filter, headers_sealed, authentication_sealed, authentication, trace_context, payload_style, batch_max_size, batch_max_wait_ms,
	destination_sealed, destination, transformation_code, transformation_enabled, transformation_version, retry_policy, ` + signingColumns

func scanSubscription(row pgx.Row) (Subscription, error) {
	var s Subscription
	r := subscriptionRow{s: &s}
	err := row.Scan(r.targets()...)
	r.finish()
	return s, err
}

// subscriptionRow is a Subscription being scanned from
// subscriptionColumns: the scan's targets, and what makes the
// subscription's values of the columns scanned together.
type subscriptionRow struct {
	s         *Subscription
	auth      authenticationColumns
	dest      destinationColumns
	batch     batchColumns
	transform transformationColumns
}

// targets are the scan targets of subscriptionColumns, in order.
func (r *subscriptionRow) targets() []any {
	s := r.s
	targets := append([]any{&s.ID, &s.MerchantID, &s.URL, &s.Events, &s.Description, &s.Status, &s.Metadata,
		&s.Health.ConsecutiveFailures, &s.Health.LastSuccessAt, &s.Health.LastFailureAt, &s.CreatedAt, &s.UpdatedAt,
		&s.RateLimit, &s.OrderingKey, &s.Filter, &s.SealedHeaders, &r.auth.sealed, &r.auth.summary, &s.TraceContext,
		&s.PayloadStyle, &r.batch.maxSize, &r.batch.maxWaitMS, &r.dest.sealed, &r.dest.summary}, r.transform.targets()...)
	targets = append(targets, &s.RetryPolicy)
	return append(targets, signingTargets(s)...)
}

// finish sets the subscription's values made of several columns, once
// they are scanned.
func (r *subscriptionRow) finish() {
	s := r.s
	if s.Metadata == nil {
		s.Metadata = map[string]string{}
	}
	s.Authentication = r.auth.value()
	s.Batch = r.batch.value()
	s.Destination = r.dest.value()
	s.Transformation = r.transform.value()
}

// authenticationColumns are the two columns of an Authentication as
// scanned: both NULL (a constraint keeps them so) for none.
type authenticationColumns struct {
	sealed  []byte
	summary *AuthenticationSummary
}

func (a authenticationColumns) value() *Authentication {
	if a.sealed == nil || a.summary == nil {
		return nil
	}
	return &Authentication{Sealed: a.sealed, Summary: *a.summary}
}

// authenticationArgs are an Authentication's two column values, nil for
// none. The summary goes as JSON text: through PgBouncer (the simple
// protocol) pgx cannot encode a struct for a column whose type it is not
// told.
func authenticationArgs(a *Authentication) (sealed []byte, summary *string, err error) {
	if a == nil {
		return nil, nil, nil
	}
	b, err := json.Marshal(a.Summary)
	if err != nil {
		return nil, nil, fmt.Errorf("authentication summary: %w", err)
	}
	text := string(b)
	return a.Sealed, &text, nil
}

// nonNil keeps a nil map from being stored as the JSON null.
func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// CreateSubscription stores an enabled subscription and its first signing
// secret, already sealed, in one transaction: a subscription never exists
// without a secret to sign its deliveries.
func (s *Subscriptions) CreateSubscription(ctx context.Context, n NewSubscription, sealedSecret []byte) (Subscription, error) {
	now := s.Now()
	id, err := uuid.NewV7()
	if err != nil {
		return Subscription{}, fmt.Errorf("create subscription: %w", err)
	}
	var sub Subscription
	authSealed, authSummary, err := authenticationArgs(n.Authentication)
	if err != nil {
		return Subscription{}, fmt.Errorf("create subscription for %s: %w", n.MerchantID, err)
	}
	destSealed, destSummary, err := destinationArgs(n.Destination)
	if err != nil {
		return Subscription{}, fmt.Errorf("create subscription for %s: %w", n.MerchantID, err)
	}
	code, enabled := transformationArgs(n.Transformation)
	policy, err := retryPolicyArg(n.RetryPolicy)
	if err != nil {
		return Subscription{}, fmt.Errorf("create subscription for %s: %w", n.MerchantID, err)
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if n.Limit > 0 {
			if err := checkSubscriptionLimit(ctx, tx, n.MerchantID, n.Limit); err != nil {
				return err
			}
		}
		var err error
		sub, err = scanSubscription(tx.QueryRow(ctx, `
			INSERT INTO subscriptions (id, merchant_id, url, events, description, status, metadata, created_at, updated_at,
				rate_limit, ordering_key, filter, headers_sealed, authentication_sealed, authentication,
				signature_scheme, encryption_key, trace_context, payload_style, batch_max_size, batch_max_wait_ms,
				destination_sealed, destination, transformation_code, transformation_enabled, transformation_version, retry_policy)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11, $12, $13, $14::jsonb, coalesce(nullif($15, ''), 'hmac_sha256'), $16::jsonb, coalesce($17::boolean, true),
				coalesce(nullif($18, ''), 'full'), $19, $20, $21, $22::jsonb, $23::text, $24::boolean, CASE WHEN $23::text IS NULL THEN 0 ELSE 1 END, $25::jsonb)
			RETURNING `+subscriptionColumns,
			id, n.MerchantID, n.URL, n.Events, n.Description, SubscriptionEnabled, nonNil(n.Metadata), now,
			n.RateLimit, n.OrderingKey, n.Filter, n.SealedHeaders, authSealed, authSummary,
			n.SignatureScheme, encryptionKeyArg(n.EncryptionKey), n.TraceContext,
			n.PayloadStyle, batchSize(n.Batch), batchWait(n.Batch), destSealed, destSummary, code, enabled, policy))
		if err != nil {
			return err
		}
		if err := insertSigningSecret(ctx, tx, id, sealedSecret, n.SigningPublicKey, now); err != nil || n.SigningPublicKey == nil {
			return err
		}
		sub, err = rereadSubscription(ctx, tx, id)
		return err
	})
	if err != nil {
		return Subscription{}, fmt.Errorf("create subscription for %s: %w", n.MerchantID, err)
	}
	return sub, nil
}

// insertSecret adds a sealed signing secret of a subscription (or a
// listener), in the transaction that creates it or rotates its secret.
func insertSecret(ctx context.Context, tx pgx.Tx, subscriptionID uuid.UUID, sealed []byte, at time.Time) error {
	return insertSigningSecret(ctx, tx, subscriptionID, sealed, nil, at)
}

// checkSubscriptionLimit refuses a create when the merchant already holds
// limit subscriptions. Concurrent creates of one merchant take their turn
// on a transaction-scoped advisory lock, so that each counts the others'
// committed rows: counting alone would let every one of them see room for
// itself. Other merchants' creates, and the merchant's other writes, do not
// wait on it.
func checkSubscriptionLimit(ctx context.Context, tx pgx.Tx, merchantID string, limit int) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockSubscriptionCreate, merchantID); err != nil {
		return err
	}
	var held int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM subscriptions
		WHERE merchant_id = $1 AND deleted_at IS NULL AND kind = 'endpoint'`, merchantID).Scan(&held); err != nil {
		return err
	}
	if held >= limit {
		return ErrSubscriptionLimit
	}
	return nil
}

// GetSubscription returns one of the merchant's subscriptions. Another
// merchant's, or a deleted one, is ErrNotFound.
func (s *Subscriptions) GetSubscription(ctx context.Context, merchantID string, id uuid.UUID) (Subscription, error) {
	sub, err := scanSubscription(s.pool.QueryRow(ctx, `SELECT `+subscriptionColumns+`
		FROM subscriptions WHERE merchant_id = $1 AND id = $2 AND deleted_at IS NULL AND kind = 'endpoint'`, merchantID, id))
	if err != nil {
		return Subscription{}, fmt.Errorf("get subscription %s: %w", id, notFound(err))
	}
	return sub, nil
}

// ListSubscriptions returns one page of the merchant's subscriptions, newest
// first. It fetches up to p.Limit+1 rows: the extra row tells the caller
// there is another page.
func (s *Subscriptions) ListSubscriptions(ctx context.Context, merchantID string, f SubscriptionFilter, p Page) ([]Subscription, error) {
	var afterAt *time.Time
	var afterID *uuid.UUID
	if p.After != nil {
		id, err := uuid.Parse(p.After.ID)
		if err != nil {
			return nil, fmt.Errorf("list subscriptions: cursor id: %w", err)
		}
		afterAt, afterID = &p.After.CreatedAt, &id
	}
	rows, err := s.pool.Query(ctx, `SELECT `+subscriptionColumns+` FROM subscriptions
		WHERE merchant_id = $1 AND deleted_at IS NULL AND kind = 'endpoint'
		  AND ($2 = '' OR status = $2)
		  AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4::uuid))
		ORDER BY created_at DESC, id DESC
		LIMIT $5`, merchantID, f.Status, afterAt, afterID, p.Limit+1)
	if err != nil {
		return nil, fmt.Errorf("list subscriptions of %s: %w", merchantID, err)
	}
	subs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Subscription, error) { return scanSubscription(r) })
	if err != nil {
		return nil, fmt.Errorf("list subscriptions of %s: %w", merchantID, err)
	}
	return subs, nil
}

// UpdateSubscription applies a partial update and returns the result.
func (s *Subscriptions) UpdateSubscription(ctx context.Context, merchantID string, id uuid.UUID, u SubscriptionUpdate) (Subscription, error) {
	authSealed, authSummary, err := authenticationArgs(u.Authentication)
	if err != nil {
		return Subscription{}, fmt.Errorf("update subscription %s: %w", id, err)
	}
	destSealed, destSummary, err := destinationArgs(u.Destination)
	if err != nil {
		return Subscription{}, fmt.Errorf("update subscription %s: %w", id, err)
	}
	code, enabled := transformationArgs(u.Transformation)
	policy, err := retryPolicyArg(u.RetryPolicy)
	if err != nil {
		return Subscription{}, fmt.Errorf("update subscription %s: %w", id, err)
	}
	sub, err := scanSubscription(s.pool.QueryRow(ctx, `
		UPDATE subscriptions SET
			-- A broker destination's url is its target: a url alone
			-- does not replace it (the destination is changed instead).
			url = CASE WHEN destination IS NOT NULL AND NOT $28 THEN url ELSE COALESCE($3, url) END,
			events = COALESCE($4, events),
			description = CASE WHEN $5 THEN $6 ELSE description END,
			status = COALESCE($7, status),
			-- Enabled again: its run of failures starts afresh, so that
			-- the auto-disable job does not disable it again at once.
			failing_since = CASE WHEN $7 = 'enabled' AND status = 'disabled' THEN NULL ELSE failing_since END,
			metadata = COALESCE($8, metadata),
			updated_at = $9,
			rate_limit = CASE WHEN $10 THEN $11 ELSE rate_limit END,
			ordering_key = CASE WHEN $12 THEN $13 ELSE ordering_key END,
			filter = CASE WHEN $14 THEN $15 ELSE filter END,
			headers_sealed = CASE WHEN $16 THEN $17::bytea ELSE headers_sealed END,
			authentication_sealed = CASE WHEN $18 THEN $19::bytea ELSE authentication_sealed END,
			authentication = CASE WHEN $18 THEN $20::jsonb ELSE authentication END,
			encryption_key = CASE WHEN $21 THEN $22::jsonb ELSE encryption_key END,
			trace_context = coalesce($23::boolean, trace_context),
			payload_style = COALESCE($24, payload_style),
			batch_max_size = CASE WHEN $25 THEN $26::int ELSE batch_max_size END,
			batch_max_wait_ms = CASE WHEN $25 THEN $27::int ELSE batch_max_wait_ms END,
			destination_sealed = CASE WHEN $28 THEN $29::bytea ELSE destination_sealed END,
			destination = CASE WHEN $28 THEN $30::jsonb ELSE destination END,
			transformation_code = CASE WHEN $31 THEN $32::text ELSE transformation_code END,
			transformation_enabled = CASE WHEN $31 THEN coalesce($33::boolean, false) ELSE transformation_enabled END,
			-- A new code is a new version; the same code saved again,
			-- or only turned on or off, keeps its version.
			transformation_version = CASE WHEN $31 AND $32::text IS DISTINCT FROM transformation_code
				THEN transformation_version + 1 ELSE transformation_version END,
			retry_policy = CASE WHEN $34 THEN $35::jsonb ELSE retry_policy END
		WHERE merchant_id = $1 AND id = $2 AND deleted_at IS NULL AND kind = 'endpoint'
		RETURNING `+subscriptionColumns,
		merchantID, id, u.URL, u.Events, u.SetDescription, u.Description, u.Status, u.Metadata, s.Now(),
		u.SetRateLimit, u.RateLimit, u.SetOrderingKey, u.OrderingKey,
		u.SetFilter, u.Filter, u.SetHeaders, u.SealedHeaders, u.SetAuthentication, authSealed, authSummary,
		u.SetEncryptionKey, encryptionKeyArg(u.EncryptionKey), u.TraceContext,
		u.PayloadStyle, u.SetBatch, batchSize(u.Batch), batchWait(u.Batch),
		u.SetDestination, destSealed, destSummary, u.SetTransformation, code, enabled, u.SetRetryPolicy, policy))
	if err != nil {
		return Subscription{}, fmt.Errorf("update subscription %s: %w", id, notFound(err))
	}
	return sub, nil
}

// DeleteSubscription soft-deletes a subscription (its deliveries keep naming
// it) and, in the same transaction, fails its pending deliveries with no
// next attempt, so that nothing more is sent to it.
func (s *Subscriptions) DeleteSubscription(ctx context.Context, merchantID string, id uuid.UUID) error {
	now := s.Now()
	tag, err := s.pool.Exec(ctx, `UPDATE subscriptions SET deleted_at = $3, updated_at = $3
		WHERE merchant_id = $1 AND id = $2 AND deleted_at IS NULL AND kind = 'endpoint'`, merchantID, id, now)
	if err != nil {
		return fmt.Errorf("delete subscription %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete subscription %s: %w", id, ErrNotFound)
	}
	// A second statement, not the same transaction: recording an attempt
	// locks deliveries then their subscription, so locking the subscription
	// then its deliveries here would deadlock with it. Leased deliveries
	// (an attempt in flight) are left to the worker, which abandons them at
	// their next attempt since the subscription is deleted; so are all of
	// them if this statement fails. Rows a record holds are skipped, not
	// waited for (SKIP LOCKED): a record that ends an ordered delivery
	// holds it and then makes the next of its line due, a row this
	// statement may hold already, and waiting both ways was a deadlock
	// that Postgres broke by failing the delete's answer after the
	// subscription was gone. The skipped ones end at their next attempt.
	if _, err := s.pool.Exec(ctx, `UPDATE deliveries d SET status = 'failed', next_attempt_at = NULL, updated_at = $3
		FROM (SELECT id, created_at FROM deliveries
		      WHERE merchant_id = $1 AND subscription_id = $2 AND status = 'pending'
		        AND (lease_until IS NULL OR lease_until < $3)
		      FOR UPDATE SKIP LOCKED) x
		WHERE d.id = x.id AND d.created_at = x.created_at`, merchantID, id, now); err != nil {
		return fmt.Errorf("stop deliveries of deleted subscription %s: %w", id, err)
	}
	return nil
}

// RotationRule decides a rotation of a subscription's signing secrets from
// those not expired at now (ids and times only: the values stay sealed)
// and now, the store's clock once the subscription is locked. The domain
// writes it (subscriptions.Rotation, which follows signer.Rotate); the
// store only persists what it decides.
type RotationRule func(current []signer.Secret, now time.Time) (signer.Rotation, error)

// RotateSecret persists a rotation of the signing secrets of the
// merchant's subscription id, as decide decides it: it expires the
// secrets of rotation.Expire and stores sealedSecret, the sealed form of
// the new secret (never stored in clear), as of rotation.New.CreatedAt,
// which also dates the subscription's update. The first statement locks
// the subscription row until commit, and decide runs under that lock, so
// that concurrent rotations apply one after the other and never leave
// three secrets active. An error of decide is returned and nothing is
// written.
func (s *Subscriptions) RotateSecret(ctx context.Context, merchantID string, id uuid.UUID, sealedSecret []byte, decide RotationRule) (Subscription, error) {
	return s.RotateSigningSecret(ctx, merchantID, id, sealedSecret, nil, decide)
}

// RotateSigningSecret is RotateSecret for a new secret with a public key
// (an Ed25519 one), stored in clear beside it; nil for none.
func (s *Subscriptions) RotateSigningSecret(ctx context.Context, merchantID string, id uuid.UUID, sealedSecret []byte, publicKey *string, decide RotationRule) (Subscription, error) {
	var sub Subscription
	err := s.tx(ctx, func(tx pgx.Tx) error {
		// Lock first, read the clock after: a rotation that waited for the
		// lock must not be dated before the one that held it.
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT true FROM subscriptions
			WHERE merchant_id = $1 AND id = $2 AND deleted_at IS NULL AND kind = 'endpoint' FOR UPDATE`, merchantID, id).Scan(&locked); err != nil {
			return notFound(err)
		}
		now := s.Now()
		rows, err := tx.Query(ctx, `SELECT id, created_at, expires_at FROM subscription_secrets
			WHERE subscription_id = $1 AND (expires_at IS NULL OR expires_at > $2)`, id, now)
		if err != nil {
			return err
		}
		secrets, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (signer.Secret, error) {
			var sec signer.Secret
			err := r.Scan(&sec.ID, &sec.CreatedAt, &sec.ExpiresAt)
			return sec, err
		})
		if err != nil {
			return err
		}
		rot, err := decide(secrets, now)
		if err != nil {
			return err
		}
		sub, err = scanSubscription(tx.QueryRow(ctx, `
			UPDATE subscriptions SET updated_at = $3
			WHERE merchant_id = $1 AND id = $2
			RETURNING `+subscriptionColumns, merchantID, id, rot.New.CreatedAt))
		if err != nil {
			return err
		}
		for _, e := range rot.Expire {
			if _, err := tx.Exec(ctx, `UPDATE subscription_secrets SET expires_at = $2 WHERE id = $1`, e.ID, e.ExpiresAt); err != nil {
				return err
			}
		}
		if err := insertSigningSecret(ctx, tx, id, sealedSecret, publicKey, rot.New.CreatedAt); err != nil || publicKey == nil {
			return err
		}
		sub, err = rereadSubscription(ctx, tx, id)
		return err
	})
	if err != nil {
		return Subscription{}, fmt.Errorf("rotate secret of subscription %s: %w", id, err)
	}
	return sub, nil
}

// SigningSecrets returns the sealed secrets of a subscription that have not
// expired at the store's now, newest first. The dispatcher opens them and
// applies signer.Active at the instant of the attempt.
func (s *Subscriptions) SigningSecrets(ctx context.Context, subscriptionID uuid.UUID) ([]Secret, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, ciphertext, created_at, expires_at FROM subscription_secrets
		WHERE subscription_id = $1 AND (expires_at IS NULL OR expires_at > $2)
		ORDER BY created_at DESC, id DESC`, subscriptionID, s.Now())
	if err != nil {
		return nil, fmt.Errorf("signing secrets of %s: %w", subscriptionID, err)
	}
	secrets, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Secret, error) {
		var sec Secret
		err := r.Scan(&sec.ID, &sec.Ciphertext, &sec.CreatedAt, &sec.ExpiresAt)
		return sec, err
	})
	if err != nil {
		return nil, fmt.Errorf("signing secrets of %s: %w", subscriptionID, err)
	}
	return secrets, nil
}
