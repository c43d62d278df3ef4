package receiver_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/webhookd/webhookd/receiver"
)

func TestSignatureMatchesKnownVectors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		secret string
		id     string
		ts     int64
		body   string
		want   string
	}{
		{"published standard webhooks vector", vectorSecret, vectorMsgID, vectorTimestamp, vectorPayload, vectorSignature},
		// The cases below were computed independently with
		// `openssl dgst -sha256 -mac HMAC`, which also reproduces the vector above.
		{"empty body", vectorSecret, vectorMsgID, vectorTimestamp, "", "v1,v48jdbgvh29KJz2Qc+ghw8G6vG3nAKnujWBg8oM/62A="},
		{"second reference secret", secondSecret, "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1700000000,
			`{"email":"test@example.com","username":"test_user"}`, "v1,NQdEbZKMXpv35zXGx8ugzf9/G9pQ+9FcOV1rDJueVyE="},
		{"utf-8 id and body, timestamp zero", secondSecret, "evt_ü", 0, "héllo", "v1,ltjdvHp/B91/7h+FgpADWkpow2kF60u0TkLdXMWYetM="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := receiver.Signature(tt.id, receiver.FormatTimestamp(time.Unix(tt.ts, 0)), []byte(tt.body), mustKey(t, tt.secret))
			if got != tt.want {
				t.Errorf("Signature = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSignatureWithSeveralKeys(t *testing.T) {
	t.Parallel()
	current, previous := mustKey(t, vectorSecret), mustKey(t, secondSecret)
	ts, body := strconv.Itoa(vectorTimestamp), []byte(vectorPayload)
	one := func(k receiver.Key) string { return receiver.Signature(vectorMsgID, ts, body, k) }

	tests := []struct {
		name string
		keys []receiver.Key
		want string
	}{
		{"no key gives an empty header", nil, ""},
		{"one key, one value", []receiver.Key{current}, vectorSignature},
		{"two keys, space-separated in the order given", []receiver.Key{current, previous}, vectorSignature + " " + one(previous)},
		{"order is kept, not sorted", []receiver.Key{previous, current}, one(previous) + " " + vectorSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := receiver.Signature(vectorMsgID, ts, body, tt.keys...); got != tt.want {
				t.Errorf("Signature = %q, want %q", got, tt.want)
			}
		})
	}
}
