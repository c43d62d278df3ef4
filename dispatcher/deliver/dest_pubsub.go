package deliver

import (
	"context"
	"errors"
	"net"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/webhookd/webhookd/internal/failtext"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// gcpPubSub publishes one message per attempt to a Google Cloud Pub/Sub
// topic: the headers as attributes, the ordering key of an ordered
// delivery as the message's ordering_key. The attempt succeeds when the
// service returns the message's id. One client per destination keeps its
// gRPC connection.
type gcpPubSub struct {
	client    *pubsub.Client
	publisher *pubsub.Publisher
}

func newPubSub(d subscriptions.Destination, dial brokerDialer, timeout time.Duration) (*gcpPubSub, error) {
	opts := []option.ClientOption{
		option.WithGRPCDialOption(grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", addr)
		})),
	}
	// The key as the engine rebuilt it from the members it uses, Google's
	// token endpoint and universe named: never the merchant's text, which
	// Google's library would read further (files, other endpoints).
	key, err := d.ServiceAccountJSON()
	if err != nil {
		return nil, err
	}
	switch {
	case d.Endpoint != "" && key == nil:
		// An emulator: no credentials, no TLS (refused unless the operator
		// allows plaintext: Destination.CheckTransport).
		opts = append(opts, option.WithEndpoint(d.Endpoint), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	case d.Endpoint != "":
		opts = append(opts, option.WithEndpoint(d.Endpoint), option.WithAuthCredentialsJSON(option.ServiceAccount, key))
	default:
		opts = append(opts, option.WithAuthCredentialsJSON(option.ServiceAccount, key))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client, err := pubsub.NewClient(ctx, d.ProjectID, opts...)
	if err != nil {
		// Its text could quote the key: the attempt log says only what
		// failed.
		return nil, failed(errAuthFailed, failtext.Told("no client could be made with credentials_json"))
	}
	p := client.Publisher(d.TopicID)
	p.EnableMessageOrdering = true
	// One message per attempt: sent at once, not held for a batch.
	p.PublishSettings.CountThreshold = 1
	p.PublishSettings.DelayThreshold = time.Millisecond
	p.PublishSettings.Timeout = timeout
	return &gcpPubSub{client: client, publisher: p}, nil
}

func (g *gcpPubSub) publish(ctx context.Context, m message) (string, error) {
	res := g.publisher.Publish(ctx, &pubsub.Message{Data: m.Body, Attributes: m.Headers, OrderingKey: m.OrderingKey})
	id, err := res.Get(ctx)
	if err != nil {
		if m.OrderingKey != "" {
			// A failed publish pauses its key; the next attempt is the
			// retry, so the key goes on.
			g.publisher.ResumePublish(m.OrderingKey)
		}
		return "", classifyPubSub(err)
	}
	return confirmedAnswer + " (message id " + id + ")", nil
}

func (g *gcpPubSub) close() {
	g.publisher.Stop()
	_ = g.client.Close()
}

// classifyPubSub gives a publish failure its attempt error code by its
// gRPC status.
func classifyPubSub(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return failed(errNotConfirmed, err)
	}
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied:
		return failed(errAuthFailed, err)
	case codes.NotFound, codes.InvalidArgument, codes.FailedPrecondition, codes.ResourceExhausted, codes.OutOfRange:
		return failed(errBrokerRefused, err)
	case codes.DeadlineExceeded:
		return failed(errNotConfirmed, err)
	default:
		return failed(errBrokerUnreachable, err)
	}
}
