// Package receiver is for the Go code of a merchant's endpoint that receives
// webhookd deliveries. It verifies the Standard Webhooks signature of each
// delivery, decodes the event envelope, drops repeated deliveries of one
// event and tells a handler whether a payout or return event is older than
// what it already knows.
//
// The package imports only the standard library and package signer, whose
// signature check it shares with webhookd. Shared duplicate stores
// live in sub-packages so that a program pays only for the client it uses:
// receiver/redisdedup (go-redis) and receiver/pgdedup (pgx).
//
// The pieces, from the wire inwards:
//
//   - [Verifier] checks the webhook-id, webhook-timestamp and
//     webhook-signature headers against the raw body.
//   - [Receiver] is an [net/http.Handler]: it reads and verifies the body,
//     decodes the [Event], asks a [Deduplicator] whether the event is new,
//     and calls a [Handler]. Its answer tells webhookd whether to retry.
//   - [MemoryDeduplicator] keeps handled event ids in memory, for a
//     single process; redisdedup and pgdedup share them across processes.
//   - [Guard] ranks payout and return statuses so that a late, stale event
//     does not overwrite a newer state, and says when to fetch the resource
//     instead.
package receiver
