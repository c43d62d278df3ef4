// Package receiver is for the Go code of a merchant's endpoint that receives
// webhookd deliveries. It verifies the Standard Webhooks signature of each
// delivery, decodes the event envelope, drops repeated deliveries of one
// event and tells a handler whether a payout or return event is older than
// what it already knows.
//
// The package is the one home of the Standard Webhooks rules webhookd
// signs and verifies by: the header names, the "whsec_" secret format
// ([ParseSecret]), the Ed25519 key formats "whsk_" ([ParsePrivateKey]) and
// "whpk_" ([ParsePublicKey]), the webhook-timestamp format and tolerance
// ([ParseTimestamp], [DefaultTolerance]), the signed content and its
// "v1" HMAC ([Signature]) and "v1a" Ed25519 signature
// ([Ed25519Signature]), and the errors a delivery is refused with. Package
// signer, which signs webhookd's deliveries, imports them from here; this
// package imports only the standard library. Shared duplicate stores live in
// sub-packages so that a program pays only for the client it uses:
// receiver/redisdedup (go-redis) and receiver/pgdedup (pgx). Likewise
// receiver/jwe (go-jose) decrypts the bodies of subscriptions with
// encrypted payloads, for [Config.Decrypter].
//
// The pieces, from the wire inwards:
//
//   - [Verifier] checks the webhook-id, webhook-timestamp and
//     webhook-signature headers against the raw body: "v1" values with the
//     subscription's "whsec_" secrets ([VerifierConfig.Secrets]), "v1a"
//     values with its "whpk_" public keys ([VerifierConfig.PublicKeys]),
//     for a subscription whose signature scheme is ed25519; a value of a
//     version it holds no key for is ignored. It is webhookd's only
//     verifier: signer.Verifier is gone. Code that called
//     signer.NewVerifier(secret) and v.Verify(h, body, now), now the
//     time of the call, now calls
//     NewVerifier(VerifierConfig{Secrets: []string{secret}}) and
//     v.Verify(h, body), with VerifierConfig.Now to pin the clock. signer's
//     verification errors have their namesakes here, except
//     ErrTimestampOutOfRange, which is [ErrTimestampTooOld] or
//     [ErrTimestampTooNew]; signer.ParseTimestamp is [ParseTimestamp].
//   - [Receiver] is an [net/http.Handler]: it reads and verifies the body,
//     decrypts it when a [Decrypter] is set (after verifying: the
//     signature covers the body as sent), decodes the [Event], asks a
//     [Deduplicator] whether the event is new, and calls a [Handler]. Its
//     answer tells webhookd whether to retry.
//   - [MemoryDeduplicator] keeps handled event ids in memory, for a
//     single process; redisdedup and pgdedup share them across processes.
//   - [Guard] ranks payout and return statuses so that a late, stale event
//     does not overwrite a newer state, and says when to fetch the resource
//     instead.
package receiver
