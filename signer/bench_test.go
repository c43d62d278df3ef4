package signer_test

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/signer"
)

func BenchmarkSign(b *testing.B) {
	body := make([]byte, 1024)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	ts := time.Unix(vectorTS, 0)
	k1, k2 := mustKey(b, vectorSecret), mustKey(b, secondSecret)
	for _, bc := range []struct {
		name string
		keys []signer.Key
	}{
		{"1KiB/1key", []signer.Key{k1}},
		{"1KiB/2keys", []signer.Key{k1, k2}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				_ = signer.Sign("0195d1f4-9c1e-7c55-a1f2-3b4c5d6e7f80", ts, body, bc.keys...)
			}
		})
	}
}

// BenchmarkEncrypt is the cost JWE adds to a delivery: encrypting a 1 KiB
// envelope to the merchant's key, per algorithm.
func BenchmarkEncrypt(b *testing.B) {
	body := make([]byte, 1024)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	for _, kp := range newKeyPairs(b) {
		key, err := signer.ParseEncryptionKey(kp.jwk)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("1KiB/"+kp.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := key.Encrypt(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
