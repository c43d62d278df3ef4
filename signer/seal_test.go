package signer_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/signer"
)

func TestSealerRoundTrip(t *testing.T) {
	s := mustSealer(t, 7)
	secret, err := signer.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Seal(secret)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Seal(secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		t.Error("two seals of one secret are equal: the nonce is not fresh")
	}
	if bytes.Contains(a, []byte(secret)) || bytes.Contains(a, []byte(strings.TrimPrefix(secret, signer.SecretPrefix))) {
		t.Error("the ciphertext contains the plaintext")
	}
	for _, c := range [][]byte{a, b} {
		got, err := s.Open(c)
		if err != nil {
			t.Fatal(err)
		}
		if got != secret {
			t.Error("Open did not return the sealed secret")
		}
	}
}

func TestSealerRefuses(t *testing.T) {
	s := mustSealer(t, 7)
	sealed, err := s.Seal("whsec_c2VjcmV0")
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		c := bytes.Clone(sealed)
		c[i] ^= 1
		return c
	}
	cases := map[string][]byte{
		"empty":             nil,
		"truncated":         sealed[:len(sealed)-1],
		"header only":       sealed[:13],
		"unknown version":   flip(0),
		"tampered nonce":    flip(1),
		"tampered body":     flip(14),
		"tampered tag":      flip(len(sealed) - 1),
		"other master key":  mustSeal(t, mustSealer(t, 8), "whsec_c2VjcmV0"),
		"plaintext as blob": []byte("whsec_c2VjcmV0"),
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := s.Open(c)
			if !errors.Is(err, signer.ErrSealed) {
				t.Fatalf("Open = %q, %v; want ErrSealed", got, err)
			}
			if got != "" {
				t.Error("Open returned text with an error")
			}
		})
	}
}

func TestNewSealerKeySize(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33, 64} {
		if _, err := signer.NewSealer(make([]byte, n)); err == nil {
			t.Errorf("NewSealer accepted a %d-byte key", n)
		}
	}
}

func TestSealerNeverPrintsKey(t *testing.T) {
	s := mustSealer(t, 7)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v", s), fmt.Sprintf("%s", s)} {
		if out != "signer.Sealer(redacted)" {
			t.Errorf("printed sealer = %q", out)
		}
	}
}

func mustSealer(t *testing.T, fill byte) *signer.Sealer {
	t.Helper()
	s, err := signer.NewSealer(bytes.Repeat([]byte{fill}, signer.MasterKeySize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustSeal(t *testing.T, s *signer.Sealer, secret string) []byte {
	t.Helper()
	c, err := s.Seal(secret)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
