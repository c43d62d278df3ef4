package pubsub

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/invalid"
)

// TestClassify: every gRPC status the publish may end with, its code and
// words, as deliver's classifyPubSub and brokerAnswer gave them.
func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err        error
		code, said string
	}{
		{status.Error(codes.Unauthenticated, "bad key at 10.1.2.3"), destination.CodeAuthFailed, "Pub/Sub: Unauthenticated"},
		{status.Error(codes.PermissionDenied, "x"), destination.CodeAuthFailed, "Pub/Sub: PermissionDenied"},
		{status.Error(codes.NotFound, "x"), destination.CodeRefused, "Pub/Sub: NotFound"},
		{status.Error(codes.InvalidArgument, "x"), destination.CodeRefused, "Pub/Sub: InvalidArgument"},
		{status.Error(codes.FailedPrecondition, "x"), destination.CodeRefused, "Pub/Sub: FailedPrecondition"},
		{status.Error(codes.ResourceExhausted, "x"), destination.CodeRefused, "Pub/Sub: ResourceExhausted"},
		{status.Error(codes.OutOfRange, "x"), destination.CodeRefused, "Pub/Sub: OutOfRange"},
		{status.Error(codes.DeadlineExceeded, "x"), destination.CodeNotConfirmed, "Pub/Sub: DeadlineExceeded"},
		{fmt.Errorf("publish: %w", context.DeadlineExceeded), destination.CodeNotConfirmed, "timed out"},
		{status.Error(codes.Unavailable, "dial tcp 10.1.2.3:443: connection refused"), destination.CodeUnreachable, "Pub/Sub: Unavailable"},
		{status.Error(codes.Unknown, "x"), destination.CodeUnreachable, "no connection to the broker"},
		{errors.New("pubsub: Stop has been called"), destination.CodeUnreachable, "no connection to the broker"},
	} {
		code, said := destination.Classify(classify(tc.err))
		if code != tc.code || said != tc.said {
			t.Errorf("classify(%v) = %s %q, want %s %q", tc.err, code, said, tc.code, tc.said)
		}
	}
}

// TestServiceAccountJSONRebuilt: what Google's library is handed is the
// key rebuilt from the members the engine uses, Google's own token
// endpoint and universe named, whatever else the merchant's file held; a
// stored key that breaks the rules is destination_invalid at Open.
func TestServiceAccountJSONRebuilt(t *testing.T) {
	t.Parallel()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	key := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	file := func(change map[string]any) string {
		m := map[string]any{"type": "service_account", "project_id": "my-project", "private_key_id": "0123abcd", "private_key": key,
			"client_email": "w@my-project.iam.gserviceaccount.com", "client_id": "1234567890",
			"auth_uri": "https://accounts.google.com/o/oauth2/auth"}
		for n, v := range change {
			m[n] = v
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	got, err := Config{CredentialsJSON: file(nil)}.serviceAccountJSON()
	if err != nil {
		t.Fatal(err)
	}
	var members map[string]string
	if err := json.Unmarshal(got, &members); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"type": "service_account", "project_id": "my-project", "private_key_id": "0123abcd", "private_key": key,
		"client_email": "w@my-project.iam.gserviceaccount.com", "client_id": "1234567890",
		"token_uri": "https://oauth2.googleapis.com/token", "universe_domain": "googleapis.com"}
	if len(members) != len(want) {
		t.Errorf("rebuilt key has members %v, want exactly those of %v", members, want)
	}
	for n, v := range want {
		if members[n] != v {
			t.Errorf("%s = %q, want %q", n, members[n], v)
		}
	}
	if b, err := (Config{}).serviceAccountJSON(); b != nil || err != nil {
		t.Errorf("an emulator's key: %s, %v; want none", b, err)
	}

	// A Config that never went through Parse (a stored value of an older
	// build reaching Open by another way) is refused before Google's
	// library reads it.
	_, err = open(Config{ProjectID: "my-project", TopicID: "webhooks", CredentialsJSON: file(map[string]any{"type": "external_account"})},
		destination.Env{})
	var f *destination.Failure
	var bad *invalid.Error
	if !errors.As(err, &f) || f.Code != destination.CodeInvalid || !errors.As(err, &bad) || f.Said != bad.Message {
		t.Errorf("open of an external_account key: %v, want destination_invalid in the rule's words", err)
	}
}
