package signer_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/webhookd/webhookd/signer"
)

func TestVerifyAccepts(t *testing.T) {
	current, previous := mustKey(t, vectorSecret), mustKey(t, secondSecret)
	ts := time.Unix(vectorTS, 0)
	body := []byte(vectorBody)
	sigCurrent := signer.Sign(vectorID, ts, body, current)
	sigBoth := signer.Sign(vectorID, ts, body, current, previous)

	tests := []struct {
		name     string
		verifier signer.Verifier
		header   http.Header
		now      time.Time
	}{
		{"published vector", signer.Verifier{Keys: []signer.Key{current}},
			headersFor(vectorID, ts, vectorSig), ts},
		{"rotation: receiver holds only the previous key",
			signer.Verifier{Keys: []signer.Key{previous}}, headersFor(vectorID, ts, sigBoth), ts},
		{"rotation: receiver holds both keys, sender signs with the new one only",
			signer.Verifier{Keys: []signer.Key{previous, current}}, headersFor(vectorID, ts, sigCurrent), ts},
		{"exactly 5 minutes old", signer.Verifier{Keys: []signer.Key{current}},
			headersFor(vectorID, ts, sigCurrent), ts.Add(5 * time.Minute)},
		{"exactly 5 minutes ahead", signer.Verifier{Keys: []signer.Key{current}},
			headersFor(vectorID, ts, sigCurrent), ts.Add(-5 * time.Minute)},
		{"wider custom tolerance", signer.Verifier{Keys: []signer.Key{current}, Tolerance: time.Hour},
			headersFor(vectorID, ts, sigCurrent), ts.Add(59 * time.Minute)},
		{"unknown versions and junk before the match are skipped", signer.Verifier{Keys: []signer.Key{current}},
			headersFor(vectorID, ts, "v1a,AAAA v2,"+vectorSig[3:]+" junk v1, "+sigCurrent), ts},
		{"hand-built map with lower-case keys", signer.Verifier{Keys: []signer.Key{current}},
			http.Header{
				"webhook-id":        {vectorID},
				"webhook-timestamp": {strconv.Itoa(vectorTS)},
				"webhook-signature": {vectorSig},
			}, ts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.verifier.Verify(tt.header, body, tt.now); err != nil {
				t.Fatalf("Verify = %v, want nil", err)
			}
		})
	}
}

func TestVerifyRejects(t *testing.T) {
	key := mustKey(t, vectorSecret)
	ts := time.Unix(vectorTS, 0)
	body := []byte(vectorBody)
	good := signer.Sign(vectorID, ts, body, key)
	v := signer.Verifier{Keys: []signer.Key{key}}
	with := func(mutate func(h http.Header)) http.Header {
		h := headersFor(vectorID, ts, good)
		mutate(h)
		return h
	}
	resigned := func(at time.Time) http.Header {
		return headersFor(vectorID, at, signer.Sign(vectorID, at, body, key))
	}

	tests := []struct {
		name     string
		verifier signer.Verifier
		header   http.Header
		body     string
		now      time.Time
		want     error
	}{
		{"wrong secret", signer.Verifier{Keys: []signer.Key{mustKey(t, secondSecret)}},
			headersFor(vectorID, ts, good), vectorBody, ts, signer.ErrNoMatchingSignature},
		{"tampered body", v, headersFor(vectorID, ts, good), `{"test": 2432232315}`, ts, signer.ErrNoMatchingSignature},
		{"body with a trailing newline", v, headersFor(vectorID, ts, good), vectorBody + "\n", ts, signer.ErrNoMatchingSignature},
		{"other webhook-id", v, with(func(h http.Header) { h.Set("webhook-id", "msg_other") }), vectorBody, ts, signer.ErrNoMatchingSignature},
		{"timestamp replaced, signature kept", v, with(func(h http.Header) { h.Set("webhook-timestamp", strconv.Itoa(vectorTS+1)) }),
			vectorBody, ts, signer.ErrNoMatchingSignature},
		{"timestamp 6 minutes old", v, resigned(ts.Add(-6 * time.Minute)), vectorBody, ts, signer.ErrTimestampOutOfRange},
		{"timestamp 6 minutes in the future", v, resigned(ts.Add(6 * time.Minute)), vectorBody, ts, signer.ErrTimestampOutOfRange},
		{"5 minutes and 1 second old", v, resigned(ts.Add(-5*time.Minute - time.Second)), vectorBody, ts, signer.ErrTimestampOutOfRange},
		{"narrow custom tolerance", signer.Verifier{Keys: []signer.Key{key}, Tolerance: 10 * time.Second},
			resigned(ts.Add(-11 * time.Second)), vectorBody, ts, signer.ErrTimestampOutOfRange},
		{"missing webhook-id", v, with(func(h http.Header) { h.Del("webhook-id") }), vectorBody, ts, signer.ErrMissingHeader},
		{"missing webhook-timestamp", v, with(func(h http.Header) { h.Del("webhook-timestamp") }), vectorBody, ts, signer.ErrMissingHeader},
		{"missing webhook-signature", v, with(func(h http.Header) { h.Del("webhook-signature") }), vectorBody, ts, signer.ErrMissingHeader},
		{"empty webhook-signature", v, with(func(h http.Header) { h.Set("webhook-signature", "") }), vectorBody, ts, signer.ErrMissingHeader},
		{"no headers at all", v, http.Header{}, vectorBody, ts, signer.ErrMissingHeader},
		{"svix-* headers only", v, http.Header{"Svix-Id": {vectorID}, "Svix-Timestamp": {strconv.Itoa(vectorTS)}, "Svix-Signature": {good}},
			vectorBody, ts, signer.ErrMissingHeader},
		{"timestamp in milliseconds", v, with(func(h http.Header) { h.Set("webhook-timestamp", strconv.Itoa(vectorTS*1000)) }),
			vectorBody, ts, signer.ErrTimestampOutOfRange},
		{"timestamp not a number", v, with(func(h http.Header) { h.Set("webhook-timestamp", "yesterday") }), vectorBody, ts, signer.ErrInvalidTimestamp},
		{"timestamp in RFC 3339", v, with(func(h http.Header) { h.Set("webhook-timestamp", "2021-02-26T15:02:10Z") }), vectorBody, ts, signer.ErrInvalidTimestamp},
		{"timestamp with a sign", v, with(func(h http.Header) { h.Set("webhook-timestamp", "+"+strconv.Itoa(vectorTS)) }), vectorBody, ts, signer.ErrInvalidTimestamp},
		{"timestamp with a leading zero", v, with(func(h http.Header) { h.Set("webhook-timestamp", "0"+strconv.Itoa(vectorTS)) }), vectorBody, ts, signer.ErrInvalidTimestamp},
		{"timestamp with a fraction", v, with(func(h http.Header) { h.Set("webhook-timestamp", strconv.Itoa(vectorTS)+".5") }), vectorBody, ts, signer.ErrInvalidTimestamp},
		{"negative timestamp", v, with(func(h http.Header) { h.Set("webhook-timestamp", "-1") }), vectorBody, ts, signer.ErrInvalidTimestamp},
		{"timestamp beyond int64", v, with(func(h http.Header) { h.Set("webhook-timestamp", "99999999999999999999") }), vectorBody, ts, signer.ErrInvalidTimestamp},
		{"garbage signature header", v, with(func(h http.Header) { h.Set("webhook-signature", "not a signature at all") }), vectorBody, ts, signer.ErrNoMatchingSignature},
		{"v1 prefix with an empty value", v, with(func(h http.Header) { h.Set("webhook-signature", "v1,") }), vectorBody, ts, signer.ErrNoMatchingSignature},
		{"right digest without version", v, with(func(h http.Header) { h.Set("webhook-signature", good[3:]) }), vectorBody, ts, signer.ErrNoMatchingSignature},
		{"right digest under v2 only", v, with(func(h http.Header) { h.Set("webhook-signature", "v2,"+good[3:]) }), vectorBody, ts, signer.ErrNoMatchingSignature},
		{"right digest under V1 (case matters)", v, with(func(h http.Header) { h.Set("webhook-signature", "V1,"+good[3:]) }), vectorBody, ts, signer.ErrNoMatchingSignature},
		{"right digest, comma-separated list", v, with(func(h http.Header) { h.Set("webhook-signature", "v1,x,"+good) }), vectorBody, ts, signer.ErrNoMatchingSignature},
		{"digest without base64 padding", v, with(func(h http.Header) { h.Set("webhook-signature", good[:len(good)-1]) }), vectorBody, ts, signer.ErrNoMatchingSignature},
		{"verifier without keys", signer.Verifier{}, headersFor(vectorID, ts, good), vectorBody, ts, signer.ErrInvalidSecret},
		{"verifier with an empty key, which anyone could sign with", signer.Verifier{Keys: []signer.Key{key, {}}},
			headersFor(vectorID, ts, signer.Sign(vectorID, ts, body, signer.Key{})), vectorBody, ts, signer.ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.verifier.Verify(tt.header, []byte(tt.body), tt.now)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestNewVerifier(t *testing.T) {
	if _, err := signer.NewVerifier(); !errors.Is(err, signer.ErrInvalidSecret) {
		t.Errorf("NewVerifier() = %v, want ErrInvalidSecret", err)
	}
	if _, err := signer.NewVerifier(vectorSecret, "oops"); !errors.Is(err, signer.ErrInvalidSecret) {
		t.Errorf("NewVerifier with a bad second secret = %v, want ErrInvalidSecret", err)
	}
	v, err := signer.NewVerifier(secondSecret, vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if v.Tolerance != 0 || len(v.Keys) != 2 {
		t.Errorf("NewVerifier = %+v, want 2 keys and the default tolerance", v)
	}
	if err := v.VerifyValues(vectorID, strconv.Itoa(vectorTS), vectorSig, []byte(vectorBody), time.Unix(vectorTS, 0)); err != nil {
		t.Errorf("VerifyValues = %v, want nil", err)
	}
}
