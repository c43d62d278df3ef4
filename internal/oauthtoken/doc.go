// Package oauthtoken gets the bearer token a subscription's endpoint asks
// for with OAuth2's client credentials grant (RFC 6749 §4.4), with a
// client secret or an RFC 7523 private_key_jwt assertion, and shares it
// between every worker process through Redis.
//
// One token per subscription and set of credentials is kept in Redis until
// shortly before it expires, sealed with the master key. When it is
// missing or due, one process at a time fetches a new one under a short
// Redis lock; the others wait for that token instead of fetching their
// own, and a failure is shared the same way for a few seconds so that a
// failing token endpoint is not asked once per delivery. After the endpoint
// answers 401, Invalidate drops the token that was refused, once however
// many workers saw the 401, and the next Token call fetches a new one.
//
// Tokens are sealed in Redis, not kept plain, because a live bearer token
// lets whoever holds it post to the merchant's endpoint as webhookd until
// it expires, and Redis is not a place secrets rest: its RDB and AOF files,
// replicas, MONITOR and SLOWLOG, and the redis-cli of whoever is looking
// into an incident all show values as they are. A sealed record also names
// the key it was written under, so that one copied to another
// subscription's key is not sent to that endpoint. The cost is one AES-GCM
// open per Token call, nothing beside the delivery's HTTP exchange. Key
// names carry an HMAC of the credentials under a key derived from the
// master key, so that a changed secret gets a token of its own while the
// names tell nothing of a secret, even a weak one.
//
// The token endpoint is reached through the client the engine gives
// (the SSRF-guarded, egress-proxied one of deliveries). A failure is an
// *Error carrying the endpoint's HTTP status; no error, log line or Redis
// key holds a secret, an assertion or a token.
package oauthtoken
