// Package jwe decrypts the bodies of webhookd deliveries to subscriptions
// with encryption: each such body is the compact JWE (RFC 7516) of the
// event envelope, encrypted to the merchant's public key, and is sent with
// content-type [ContentType].
//
// The package is also where webhookd writes down which JWEs it makes, so
// that what the engine encrypts is what receivers accept: package signer
// encrypts by [Algorithm] and [ContentEncryption]. The rules:
//
//   - an RSA key of 2048 to 4096 bits is used with RSA-OAEP-256;
//   - an EC key on P-256, P-384 or P-521 is used with ECDH-ES+A256KW;
//   - the content is encrypted with A256GCM, never compressed;
//   - nothing else is made or accepted: no "none", no RSA1_5, no direct
//     ECDH-ES or other key-wrapping downgrade, no symmetric keys.
//
// # Verify first, then decrypt
//
// webhookd signs the body as sent, the JWE. A receiver checks the
// signature over those bytes first and decrypts only what verified:
//
//   - the signature is what proves the delivery came from webhookd. Anyone
//     can encrypt to a public key, so a JWE that decrypts proves nothing
//     about its sender;
//   - a forged request is then refused by a cheap HMAC check, before any
//     private-key operation (far dearer than an HMAC), so unsigned traffic
//     cannot make the endpoint spend its CPU, or probe its private key;
//   - decrypting first would mean verifying a signature over something
//     other than what webhookd signed.
//
// With a [receiver.Receiver], set [receiver.Config.Decrypter] to a
// [Decrypter]: the receiver reads the body, verifies it, then calls
// [Decrypter.Decrypt] and decodes the envelope from the plaintext. Without
// the handler, call [receiver.Verifier.Verify] on the body and then
// [Decrypter.Decrypt].
//
// The package imports the standard library, package receiver's module and
// github.com/go-jose/go-jose/v4, nothing else.
package jwe
