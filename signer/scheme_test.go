package signer_test

import (
	"errors"
	"testing"

	"github.com/webhookd/webhookd/signer"
)

func TestParseScheme(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want signer.Scheme
		err  error
	}{
		{"hmac_sha256", signer.SchemeHMACSHA256, nil},
		{"ed25519", signer.SchemeEd25519, nil},
		{"", "", signer.ErrUnknownScheme},
		{"Ed25519", "", signer.ErrUnknownScheme},
		{"rsa", "", signer.ErrUnknownScheme},
	} {
		got, err := signer.ParseScheme(tt.in)
		if got != tt.want || !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
			t.Errorf("ParseScheme(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestSchemeOf(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want signer.Scheme
	}{
		{vectorSecret, signer.SchemeHMACSHA256},
		{vectorPrivateKey, signer.SchemeEd25519},
		{"whsk_ unchecked beyond the prefix", signer.SchemeEd25519},
		{vectorPublicKey, ""},
		{"", ""},
	} {
		got, err := signer.SchemeOf(tt.in)
		if got != tt.want || (tt.want == "") != errors.Is(err, signer.ErrInvalidSecret) {
			t.Errorf("SchemeOf(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
