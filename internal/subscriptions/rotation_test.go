package subscriptions_test

import (
	"errors"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/subscriptions"
	"github.com/webhookd/webhookd/signer"
)

// The rule the store applies under its lock is signer.Rotate, with the new
// secret dated after every stored one, whatever the store's clock says.
func TestRotationFollowsSignerRotate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	secret, err := signer.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	current := []signer.Secret{{ID: 1, CreatedAt: now.Add(-time.Hour)}}
	rot, err := subscriptions.Rotation(secret)(current, now)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := signer.Rotate(current, now, secret)
	if rot.New != want.New || len(rot.Expire) != 1 || rot.Expire[0] != want.Expire[0] {
		t.Fatalf("Rotation = %+v, want %+v", rot, want)
	}

	// Another instance, its clock a second ahead, rotated last.
	ahead := now.Add(time.Second)
	current = append(current, signer.Secret{ID: 2, CreatedAt: ahead})
	rot, err = subscriptions.Rotation(secret)(current, now)
	if err != nil {
		t.Fatal(err)
	}
	if !rot.New.CreatedAt.After(ahead) {
		t.Fatalf("new secret dated %s, not after the newest stored one (%s)", rot.New.CreatedAt, ahead)
	}

	if _, err := subscriptions.Rotation("not-a-secret")(nil, now); !errors.Is(err, signer.ErrInvalidSecret) {
		t.Fatalf("rotation to a bad secret: %v", err)
	}
}
