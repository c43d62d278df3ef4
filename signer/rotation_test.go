package signer_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/receiver"
	"github.com/webhookd/webhookd/signer"
)

var t0 = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ptr(t time.Time) *time.Time { return &t }

func ids(secrets []signer.Secret) []int64 {
	out := make([]int64, len(secrets))
	for i, s := range secrets {
		out[i] = s.ID
	}
	return out
}

func TestActive(t *testing.T) {
	secrets := []signer.Secret{
		{ID: 1, CreatedAt: at(0), ExpiresAt: ptr(at(10 * time.Hour))},
		{ID: 2, CreatedAt: at(5 * time.Hour), ExpiresAt: ptr(at(30 * time.Hour))},
		{ID: 3, CreatedAt: at(6 * time.Hour)},
		{ID: 4, CreatedAt: at(100 * time.Hour)},
	}
	tests := []struct {
		name string
		now  time.Time
		want []int64
	}{
		{"before any secret exists", at(-time.Second), []int64{}},
		{"created_at is inclusive", at(0), []int64{1}},
		{"two active, newest first", at(5 * time.Hour), []int64{2, 1}},
		{"three unexpired: the newest two win", at(6 * time.Hour), []int64{3, 2}},
		{"expires_at is exclusive", at(30 * time.Hour), []int64{3}},
		{"a secret created in the future is not active yet", at(99 * time.Hour), []int64{3}},
		{"the next one takes over when created", at(100 * time.Hour), []int64{4, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ids(signer.Active(secrets, tt.now)); !slices.Equal(got, tt.want) {
				t.Errorf("Active = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestActiveBreaksTiesByID(t *testing.T) {
	secrets := []signer.Secret{{ID: 7, CreatedAt: t0}, {ID: 9, CreatedAt: t0}, {ID: 8, CreatedAt: t0}}
	if got := ids(signer.Active(secrets, t0)); !slices.Equal(got, []int64{9, 8}) {
		t.Errorf("Active = %v, want [9 8]", got)
	}
	if got := ids(secrets); !slices.Equal(got, []int64{7, 9, 8}) {
		t.Errorf("Active reordered its input: %v", got)
	}
}

// TestRotationSequence plays rotations against an explicit clock, as a store
// would persist them, and checks which secrets sign at each instant.
func TestRotationSequence(t *testing.T) {
	secrets := []signer.Secret{{ID: 1, Value: mustSecret(t), CreatedAt: t0}}
	nextID := int64(2)
	rotate := func(now time.Time) signer.Rotation {
		t.Helper()
		r, err := signer.Rotate(secrets, now, mustSecret(t))
		if err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		secrets = r.Apply(secrets, nextID)
		nextID++
		return r
	}
	active := func(now time.Time) []int64 { return ids(signer.Active(secrets, now)) }

	type step struct {
		name       string
		rotateAt   *time.Time // nil: only check
		wantExpire []signer.Expiry
		checkAt    time.Time
		wantActive []int64
	}
	steps := []step{
		{name: "a new subscription signs with its only secret",
			checkAt: at(time.Hour), wantActive: []int64{1}},
		{name: "first rotation: the new secret is current, the old one gets 24 h",
			rotateAt:   ptr(at(2 * time.Hour)),
			wantExpire: []signer.Expiry{{ID: 1, ExpiresAt: at(26 * time.Hour)}},
			checkAt:    at(2 * time.Hour), wantActive: []int64{2, 1}},
		{name: "23 h later both still sign",
			checkAt: at(25 * time.Hour), wantActive: []int64{2, 1}},
		{name: "second rotation inside the overlap drops the oldest at once",
			rotateAt: ptr(at(25 * time.Hour)),
			wantExpire: []signer.Expiry{
				{ID: 2, ExpiresAt: at(49 * time.Hour)},
				{ID: 1, ExpiresAt: at(25 * time.Hour)},
			},
			checkAt: at(25 * time.Hour), wantActive: []int64{3, 2}},
		{name: "the previous secret is still valid one second before its overlap ends",
			checkAt: at(49*time.Hour - time.Second), wantActive: []int64{3, 2}},
		{name: "and gone when it ends",
			checkAt: at(49 * time.Hour), wantActive: []int64{3}},
		{name: "25 h after the last rotation only one secret is active",
			checkAt: at(50 * time.Hour), wantActive: []int64{3}},
		{name: "a rotation after the overlap expires nothing already expired",
			rotateAt:   ptr(at(60 * time.Hour)),
			wantExpire: []signer.Expiry{{ID: 3, ExpiresAt: at(84 * time.Hour)}},
			checkAt:    at(60 * time.Hour), wantActive: []int64{4, 3}},
		{name: "three rotations in one minute still leave two active",
			rotateAt: ptr(at(60*time.Hour + time.Minute)),
			wantExpire: []signer.Expiry{
				{ID: 4, ExpiresAt: at(84*time.Hour + time.Minute)},
				{ID: 3, ExpiresAt: at(60*time.Hour + time.Minute)},
			},
			checkAt: at(60*time.Hour + time.Minute), wantActive: []int64{5, 4}},
	}
	for _, s := range steps {
		if s.rotateAt != nil {
			r := rotate(*s.rotateAt)
			if !slices.EqualFunc(r.Expire, s.wantExpire, func(a, b signer.Expiry) bool {
				return a.ID == b.ID && a.ExpiresAt.Equal(b.ExpiresAt)
			}) {
				t.Fatalf("%s: Expire = %v, want %v", s.name, r.Expire, s.wantExpire)
			}
			if r.New.ID != 0 || !r.New.CreatedAt.Equal(*s.rotateAt) || r.New.ExpiresAt != nil {
				t.Fatalf("%s: New = %+v, want ID 0, CreatedAt now, no expiry", s.name, r.New)
			}
		}
		if got := active(s.checkAt); !slices.Equal(got, s.wantActive) {
			t.Fatalf("%s: Active = %v, want %v", s.name, got, s.wantActive)
		}
		for _, probe := range []time.Time{s.checkAt, s.checkAt.Add(time.Hour), s.checkAt.Add(48 * time.Hour)} {
			n := 0
			for _, sec := range secrets {
				if sec.ActiveAt(probe) {
					n++
				}
			}
			if n > signer.MaxActiveSecrets {
				t.Fatalf("%s: %d secrets active at %s, more than %d", s.name, n, probe, signer.MaxActiveSecrets)
			}
		}
	}
}

func TestRotateNeverExtendsAnExpiry(t *testing.T) {
	now := at(time.Hour)
	secrets := []signer.Secret{{ID: 1, CreatedAt: t0, ExpiresAt: ptr(at(3 * time.Hour))}}
	r, err := signer.Rotate(secrets, now, mustSecret(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Expire) != 1 || !r.Expire[0].ExpiresAt.Equal(at(3*time.Hour)) {
		t.Errorf("Expire = %v, want secret 1 kept at its earlier expiry %s", r.Expire, at(3*time.Hour))
	}
}

func TestRotateRejectsAnInvalidNewSecret(t *testing.T) {
	if _, err := signer.Rotate(nil, t0, "plain-text"); !errors.Is(err, signer.ErrInvalidSecret) {
		t.Errorf("Rotate = %v, want ErrInvalidSecret", err)
	}
}

func TestRotatedSecretsSignAndVerify(t *testing.T) {
	secrets := []signer.Secret{{ID: 1, Value: mustSecret(t), CreatedAt: t0}}
	r, err := signer.Rotate(secrets, at(time.Hour), mustSecret(t))
	if err != nil {
		t.Fatal(err)
	}
	secrets = r.Apply(secrets, 2)
	now := at(2 * time.Hour)
	keys, err := signer.Keys(signer.Active(secrets, now))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	signer.SetHeaders(h, "evt", now, []byte("{}"), keys...)
	for _, s := range secrets {
		v, err := receiver.NewVerifier(receiver.VerifierConfig{Secrets: []string{s.Value}, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(h, []byte("{}")); err != nil {
			t.Errorf("secret %d alone does not verify the rotated signature: %v", s.ID, err)
		}
	}
}

// TestRotationSignsWithBothKeysOfEitherScheme: during the overlap a
// delivery carries one signature per active key, newest first, each of its
// key's scheme, whether the rotation keeps Ed25519 or moves from HMAC to
// Ed25519; a receiver holding either the old or the new key (a "whsec_"
// secret or a "whpk_" public key) accepts it, and after the overlap only
// the new one does.
func TestRotationSignsWithBothKeysOfEitherScheme(t *testing.T) {
	edOld, edOldPub := mustKeyPair(t)
	edNew, edNewPub := mustKeyPair(t)
	hmacOld := mustSecret(t)
	// verifierOf builds a receiver config holding the key a merchant has
	// for a stored signing secret.
	verifierOf := func(secret, publicKey string) receiver.VerifierConfig {
		if publicKey != "" {
			return receiver.VerifierConfig{PublicKeys: []string{publicKey}}
		}
		return receiver.VerifierConfig{Secrets: []string{secret}}
	}
	tests := []struct {
		name                string
		oldValue, oldPublic string
		newValue, newPublic string
		wantVersions        string // of the header during the overlap, newest first
	}{
		{"ed25519 to ed25519", edOld, edOldPub, edNew, edNewPub, "v1a v1a"},
		{"hmac_sha256 to ed25519", hmacOld, "", edNew, edNewPub, "v1a v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secrets := []signer.Secret{{ID: 1, Value: tt.oldValue, CreatedAt: t0}}
			r, err := signer.Rotate(secrets, at(time.Hour), tt.newValue)
			if err != nil {
				t.Fatal(err)
			}
			secrets = r.Apply(secrets, 2)
			body := []byte(`{"id":"evt"}`)
			for _, phase := range []struct {
				name        string
				now         time.Time
				oldAccepted bool
			}{
				{"during the overlap", at(2 * time.Hour), true},
				{"after the overlap", at(time.Hour + signer.RotationOverlap), false},
			} {
				keys, err := signer.SigningKeys(signer.Active(secrets, phase.now))
				if err != nil {
					t.Fatal(err)
				}
				h := http.Header{}
				signer.SetHeadersWith(h, "evt", phase.now, body, keys...)
				if phase.oldAccepted {
					if got := versions(h.Get(signer.HeaderSignature)); got != tt.wantVersions {
						t.Errorf("%s: header versions %q, want %q", phase.name, got, tt.wantVersions)
					}
				}
				for _, held := range []struct {
					name string
					cfg  receiver.VerifierConfig
					want bool
				}{
					{"old key", verifierOf(tt.oldValue, tt.oldPublic), phase.oldAccepted},
					{"new key", verifierOf(tt.newValue, tt.newPublic), true},
				} {
					held.cfg.Now = func() time.Time { return phase.now }
					v, err := receiver.NewVerifier(held.cfg)
					if err != nil {
						t.Fatal(err)
					}
					if err := v.Verify(h, body); (err == nil) != held.want {
						t.Errorf("%s, receiver holding the %s: Verify = %v, want accepted %v", phase.name, held.name, err, held.want)
					}
				}
			}
		})
	}
}

// versions lists the version tags of a webhook-signature header's values.
func versions(header string) string {
	var out []string
	for _, v := range strings.Fields(header) {
		tag, _, _ := strings.Cut(v, ",")
		out = append(out, tag)
	}
	return strings.Join(out, " ")
}

func TestRotateAcceptsAnEd25519Key(t *testing.T) {
	priv, _ := mustKeyPair(t)
	r, err := signer.Rotate(nil, t0, priv)
	if err != nil || r.New.Value != priv {
		t.Errorf("Rotate to a whsk_ key: %v, or New is not the key", err)
	}
}
