package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-jose/go-jose/v4"
)

// The jwe scenario's key kinds (-jwe-key): the two the engine encrypts to.
const (
	jweKeyEC  = "ec"
	jweKeyRSA = "rsa"
)

// jweScenario is single's workload to a subscription with encrypted
// payloads (issue 26): each body is the compact JWE of the envelope to a
// key pair the bench makes (-jwe-key: P-256, ECDH-ES+A256KW, or RSA-2048,
// RSA-OAEP-256; A256GCM). The receivers verify the signature over the JWE
// as sent, decrypt it with go-jose and check that it carries the event the
// headers name before counting it: the receiving side's cost is the
// bench's CPU, the encryption's the engine's.
func jweScenario(ctx context.Context, l *lab) (*report, error) {
	key, err := newBenchJWE(l.cfg.jweKey)
	if err != nil {
		return nil, err
	}
	r, _, rcv, err := singleShaped(ctx, l, "jwe", fmt.Sprintf(" with encrypted payloads (%s key, %s, A256GCM)", l.cfg.jweKey, key.alg), endpointShape{
		receiving: receiverOptions{open: key.open},
		fields: func(_ int, url string) map[string]any {
			return map[string]any{"url": url, "encryption": map[string]any{"public_key": key.jwk}}
		},
	}, nil)
	if err != nil {
		return r, err
	}
	n := rcv.undecryptable.Load()
	r.add("undecryptable", n, "requests")
	if n > 0 {
		r.note("%d deliveries could not be decrypted, or did not carry the event their headers named", n)
	}
	return r, nil
}

// benchJWE is the run's encryption key pair: the public JWK the
// subscription is given, the private key the receivers decrypt with.
type benchJWE struct {
	priv any // *ecdsa.PrivateKey or *rsa.PrivateKey
	alg  jose.KeyAlgorithm
	jwk  json.RawMessage
}

// newBenchJWE makes a key pair of kind (jweKeyEC or jweKeyRSA).
func newBenchJWE(kind string) (*benchJWE, error) {
	k := &benchJWE{}
	var pub any
	switch kind {
	case jweKeyEC:
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("jwe key: %w", err)
		}
		k.priv, pub, k.alg = priv, &priv.PublicKey, jose.ECDH_ES_A256KW
	case jweKeyRSA:
		priv, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, fmt.Errorf("jwe key: %w", err)
		}
		k.priv, pub, k.alg = priv, &priv.PublicKey, jose.RSA_OAEP_256
	default:
		return nil, fmt.Errorf("jwe key: unknown kind %q", kind)
	}
	jwk, err := jose.JSONWebKey{Key: pub, KeyID: "webhookd-bench", Algorithm: string(k.alg), Use: "enc"}.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("jwe key: %w", err)
	}
	k.jwk = jwk
	return k, nil
}

// open decrypts a compact JWE body with the private key, taking only the
// algorithms the engine uses for this kind of key.
func (k *benchJWE) open(body []byte) ([]byte, error) {
	obj, err := jose.ParseEncryptedCompact(string(body), []jose.KeyAlgorithm{k.alg}, []jose.ContentEncryption{jose.A256GCM})
	if err != nil {
		return nil, fmt.Errorf("jwe: %w", err)
	}
	plain, err := obj.Decrypt(k.priv)
	if err != nil {
		return nil, fmt.Errorf("jwe: %w", err)
	}
	return plain, nil
}

// opened tells whether a verified body opens (rs.open) into the envelope
// of event id, counting it in undecryptable when not.
func (rs *receivers) opened(body []byte, id string) bool {
	plain, err := rs.open(body)
	if err == nil {
		var env struct {
			ID string `json:"id"`
		}
		if err = json.Unmarshal(plain, &env); err == nil && env.ID != id {
			err = errors.New("the envelope is not the event its headers name")
		}
	}
	if err != nil {
		rs.undecryptable.Add(1)
		return false
	}
	return true
}
