package deliver

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/webhookd/webhookd/internal/subscriptions"
)

// TestEngineCredentials: a destination's own key is always used; the
// engine's chain is loaded at the first keyless destination of an
// allowed queue and once only; a refusal, a failed load (tried again
// next time) and a failed retrieve are auth_failed.
func TestEngineCredentials(t *testing.T) {
	t.Parallel()
	const prefix = "https://sqs.eu-west-1.amazonaws.com/123456789012/"
	allowed := subscriptions.Destination{Type: "sqs", QueueURL: prefix + "payouts", Region: "eu-west-1"}
	loads := 0
	var loadErr error
	e := newEngineCredentials([]string{prefix})
	e.load = func(context.Context) (aws.Config, error) {
		loads++
		if loadErr != nil {
			return aws.Config{}, loadErr
		}
		return aws.Config{Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no EC2 IMDS role found")
		})}, nil
	}
	ctx := context.Background()
	authFailed := func(err error, why string) {
		t.Helper()
		var be *brokerError
		if !errors.As(err, &be) || be.code != errAuthFailed || !strings.Contains(err.Error(), why) {
			t.Errorf("error %v, want auth_failed saying %q", err, why)
		}
	}

	keyed := allowed
	keyed.AccessKeyID, keyed.SecretAccessKey = "AKIAMERCHANT", "merchant-secret"
	p, err := e.forDestination(ctx, keyed)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := p.Retrieve(ctx); c.AccessKeyID != "AKIAMERCHANT" || loads != 0 {
		t.Errorf("keyed destination: key %q, %d loads; want its own key and no load", c.AccessKeyID, loads)
	}

	elsewhere := allowed
	elsewhere.QueueURL = "https://sqs.eu-west-1.amazonaws.com/999999999999/payouts"
	_, err = e.forDestination(ctx, elsewhere)
	authFailed(err, "WEBHOOKD_SQS_ENGINE_CREDENTIALS")
	var off *engineCredentials
	_, err = off.forDestination(ctx, allowed)
	authFailed(err, "WEBHOOKD_SQS_ENGINE_CREDENTIALS")
	if loads != 0 {
		t.Errorf("%d loads for refused destinations, want none", loads)
	}

	loadErr = errors.New("bad shared config")
	_, err = e.forDestination(ctx, allowed)
	authFailed(err, "bad shared config")
	loadErr = nil
	for range 2 {
		if p, err = e.forDestination(ctx, allowed); err != nil {
			t.Fatal(err)
		}
	}
	if loads != 2 {
		t.Errorf("%d loads, want 2 (the failed one tried again, then kept)", loads)
	}
	_, err = p.Retrieve(ctx)
	authFailed(err, "no EC2 IMDS role found")
	authFailed(classifySQS(fmtWrap(err)), "no EC2 IMDS role found")
}

// fmtWrap wraps err as the SDK's signing step does.
func fmtWrap(err error) error {
	return errors.Join(errors.New("operation error SQS: SendMessage"), err)
}

// TestEngineCredentialsKeepTheDeliveriesDialer: a destination sent with
// the engine's credentials still dials through the deliveries' dialer
// (here one that refuses every address, as the address check would).
func TestEngineCredentialsKeepTheDeliveriesDialer(t *testing.T) {
	t.Parallel()
	const prefix = "https://sqs.eu-west-1.amazonaws.com/123456789012/"
	e := newEngineCredentials([]string{prefix})
	e.load = func(context.Context) (aws.Config, error) {
		return aws.Config{Credentials: credentials.NewStaticCredentialsProvider("AKIAENGINE", "engine-secret", "")}, nil
	}
	var dialed []string
	dial := func(_ context.Context, _, address string) (net.Conn, error) {
		dialed = append(dialed, address)
		return nil, errors.New("refused by the address check")
	}
	d := subscriptions.Destination{Type: "sqs", QueueURL: prefix + "payouts", Region: "eu-west-1"}
	c, err := newBrokerClient(d, dial, time.Second, e)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	_, err = c.publish(context.Background(), message{DeliveryID: "d1", Body: []byte(`{}`), Headers: map[string]string{"webhook-id": "e1"}})
	var be *brokerError
	if !errors.As(err, &be) || be.code != errBrokerUnreachable || len(dialed) == 0 || !strings.HasPrefix(dialed[0], "sqs.eu-west-1.amazonaws.com:") {
		t.Errorf("publish = %v after dialling %v; want broker_unreachable through the given dialer to the region's SQS", err, dialed)
	}
}
