package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
)

// TestJWEReceiversDecryptBeforeCounting encrypts deliveries to the jwe
// scenario's public JWK, as the engine does, for each kind of key: the
// receivers count one that opens into the envelope of the event its
// headers name, and refuse (400, undecryptable) one naming another event
// and a body in clear.
func TestJWEReceiversDecryptBeforeCounting(t *testing.T) {
	for _, kind := range []string{jweKeyEC, jweKeyRSA} {
		t.Run(kind, func(t *testing.T) {
			k, err := newBenchJWE(kind)
			if err != nil {
				t.Fatal(err)
			}
			var jwk jose.JSONWebKey
			if err := jwk.UnmarshalJSON(k.jwk); err != nil || !jwk.IsPublic() || jwk.Algorithm != string(k.alg) || jwk.Use != "enc" {
				t.Fatalf("the subscription's JWK %s: public %v, %v", k.jwk, jwk.IsPublic(), err)
			}
			enc, err := jose.NewEncrypter(jose.A256GCM, jose.Recipient{Algorithm: k.alg, Key: jwk.Key}, nil)
			if err != nil {
				t.Fatal(err)
			}
			seal := func(envelope string) []byte {
				obj, err := enc.Encrypt([]byte(envelope))
				if err != nil {
					t.Fatal(err)
				}
				s, err := obj.CompactSerialize()
				if err != nil {
					t.Fatal(err)
				}
				return []byte(s)
			}
			log := newPublishLog(4)
			rcv, key := armedReceiversWith(t, 1, 0, log, receiverOptions{open: k.open})
			defer rcv.close()
			id := uuid.NewString()
			log.record(id, time.Now())
			envelope := func(id string) string {
				b, _ := json.Marshal(map[string]any{"id": id, "type": benchEventType, "payload": map[string]int{"amount": 1}})
				return string(b)
			}
			for _, tc := range []struct {
				name          string
				body          []byte
				status        int
				unique, undec int64
			}{
				{"another event's envelope", seal(envelope(uuid.NewString())), http.StatusBadRequest, 0, 1},
				{"in clear", []byte(envelope(id)), http.StatusBadRequest, 0, 2},
				{"its own envelope", seal(envelope(id)), http.StatusNoContent, 1, 2},
			} {
				status, err := post(t, http.DefaultClient, rcv.endpoints[0].url, id, time.Now(), tc.body, key)
				if err != nil || status != tc.status {
					t.Errorf("%s: %d, %v; want %d", tc.name, status, err, tc.status)
				}
				if u, n := rcv.counts().Unique, rcv.undecryptable.Load(); u != tc.unique || n != tc.undec {
					t.Errorf("%s: %d deliveries, %d undecryptable; want %d, %d", tc.name, u, n, tc.unique, tc.undec)
				}
			}
		})
	}
}
