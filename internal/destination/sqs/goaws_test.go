package sqs_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/testfixtures/goawstest"
)

// accessKey is the access key the test's SQS server takes; any other is
// refused as SQS refuses an unknown key.
const accessKey = goawstest.AccessKey

// queuePrefix is what every queue URL of the test's server starts with.
func queuePrefix(s *sqsServer) string { return s.Endpoint() + "/" + goawstest.Account + "/" }

// sqsServer is goaws in process (goawstest) as this package's tests use
// it.
type sqsServer struct{ *goawstest.Server }

func newSQSServer(t *testing.T) *sqsServer { return &sqsServer{goawstest.Start(t)} }

// sqsSend is what a SendMessage request asked for.
type sqsSend struct {
	MessageGroupID, MessageDeduplicationID string
}

// sends are the SendMessage requests to queueURL so far.
func (s *sqsServer) sends(queueURL string) []sqsSend {
	var out []sqsSend
	for _, r := range s.Sent(queueURL) {
		out = append(out, sqsSend{MessageGroupID: r.Fields.Get("MessageGroupId"), MessageDeduplicationID: r.Fields.Get("MessageDeduplicationId")})
	}
	return out
}

// endpoint is the server's URL.
func (s *sqsServer) endpoint() string { return s.Endpoint() }

// down stops the server and returns what starts it again on the same
// address, for desttest's Down.
func (s *sqsServer) down(t testing.TB) (up func()) { return s.Down(t) }

// queue creates a queue of the test's own and returns its URL.
func (s *sqsServer) queue(t testing.TB, fifo bool) string {
	_, queueURL := s.Queue(t, "webhookd", fifo)
	return queueURL
}

// receive takes n messages off the queue (deleting them) within timeout.
func (s *sqsServer) receive(t *testing.T, queueURL string, n int, timeout time.Duration) []types.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := s.Await(ctx, t, queueURL, n)
	if len(out) < n {
		t.Fatalf("%d messages of %d within %v", len(out), n, timeout)
	}
	return out
}

// receiver is desttest's Receive of queueURL: the next message, deleted
// once read, its attributes as headers and its group as key.
func (s *sqsServer) receiver(queueURL string) func(ctx context.Context, t testing.TB) desttest.Arrived {
	return func(ctx context.Context, t testing.TB) desttest.Arrived {
		t.Helper()
		got := s.Await(ctx, t, queueURL, 1)
		if len(got) == 0 {
			t.Fatalf("no message at %s: %v", queueURL, ctx.Err())
		}
		return arrived(got[0])
	}
}

// arrived is m as a consumer reads it.
func arrived(m types.Message) desttest.Arrived {
	headers := make(map[string]string, len(m.MessageAttributes))
	for k, v := range m.MessageAttributes {
		headers[k] = aws.ToString(v.StringValue)
	}
	return desttest.Arrived{Body: []byte(aws.ToString(m.Body)), Headers: headers,
		Key: m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]}
}
