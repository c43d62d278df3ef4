package pubsub

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/webhookd/webhookd/internal/destination"
)

// confirmed is the attempt's answer when the service took the message.
const confirmed = "confirmed by broker"

// errClosed is a Send after Close.
var errClosed = errors.New("pubsub: publisher closed")

// publisher publishes one message per Send to a topic: the headers as
// attributes, the ordering key as the message's ordering_key. The send
// succeeds when the service returns the message's id. One client per
// destination keeps its gRPC connection.
type publisher struct {
	client    *gpubsub.Client
	publisher *gpubsub.Publisher
	closed    atomic.Bool
}

// open is the publisher of c, dialling through env.Dial. With a key:
// TLS, and the key as the engine rebuilt it (serviceAccountJSON), from
// which Google's library signs its own JWTs (self-signed, no token
// endpoint is called). Without one (an emulator): no credentials, no TLS
// (Plaintext says so, for the operator's rule).
func open(c Config, env destination.Env) (*publisher, error) {
	opts := []option.ClientOption{
		option.WithGRPCDialOption(grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return env.Dial(ctx, "tcp", addr)
		})),
	}
	key, err := c.serviceAccountJSON()
	if err != nil {
		return nil, destination.Refused(err)
	}
	switch {
	case c.emulator():
		opts = append(opts, option.WithEndpoint(c.Endpoint), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	case c.Endpoint != "":
		opts = append(opts, option.WithEndpoint(c.Endpoint), option.WithAuthCredentialsJSON(option.ServiceAccount, key))
	default:
		opts = append(opts, option.WithAuthCredentialsJSON(option.ServiceAccount, key))
	}
	ctx, cancel := context.WithTimeout(context.Background(), env.Timeout)
	defer cancel()
	client, err := gpubsub.NewClient(ctx, c.ProjectID, opts...)
	if err != nil {
		// Its text could quote the key: nothing of it is kept, even for
		// the log.
		return nil, destination.Fail(destination.CodeAuthFailed, "no client could be made with credentials_json", nil)
	}
	p := client.Publisher(c.TopicID)
	p.EnableMessageOrdering = true
	// One message per Send: sent at once, not held for a batch.
	p.PublishSettings.CountThreshold = 1
	p.PublishSettings.DelayThreshold = time.Millisecond
	p.PublishSettings.Timeout = env.Timeout
	return &publisher{client: client, publisher: p}, nil
}

// Send implements destination.Publisher.
func (p *publisher) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	if p.closed.Load() {
		return destination.Result{}, destination.Fail(destination.CodeUnreachable, "the destination's publisher was closed", errClosed)
	}
	res := p.publisher.Publish(ctx, &gpubsub.Message{Data: m.Body, Attributes: m.Headers, OrderingKey: m.OrderingKey})
	id, err := res.Get(ctx)
	if err != nil {
		if m.OrderingKey != "" {
			// A failed publish pauses its key; the next attempt is the
			// retry, so the key goes on.
			p.publisher.ResumePublish(m.OrderingKey)
		}
		return destination.Result{}, classify(err)
	}
	return destination.Result{Answer: confirmed + " (message id " + id + ")"}, nil
}

// Close implements destination.Publisher: the publisher stopped (what it
// holds is sent first) and the connection closed; Send fails after it.
func (p *publisher) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.publisher.Stop()
	return p.client.Close()
}

// classify gives a publish failure its attempt error code by its gRPC
// status, in the merchant's words: "Pub/Sub: " and the status code's
// name, never its message (which may name our addresses); a failure of
// no status in failtext's words.
func classify(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return destination.Fail(destination.CodeNotConfirmed, said(err), err)
	}
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied:
		return destination.Fail(destination.CodeAuthFailed, said(err), err)
	case codes.NotFound, codes.InvalidArgument, codes.FailedPrecondition, codes.ResourceExhausted, codes.OutOfRange:
		return destination.Fail(destination.CodeRefused, said(err), err)
	case codes.DeadlineExceeded:
		return destination.Fail(destination.CodeNotConfirmed, said(err), err)
	default:
		return destination.Fail(destination.CodeUnreachable, said(err), err)
	}
}

// said is the service's answer in err, its status code's name; "" when
// err carries none, for destination.Classify to find words.
func said(err error) string {
	if st, ok := status.FromError(err); ok && st.Code() != codes.OK && st.Code() != codes.Unknown {
		return "Pub/Sub: " + st.Code().String()
	}
	return ""
}
