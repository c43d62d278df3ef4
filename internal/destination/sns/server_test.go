package sns_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/testfixtures/goawstest"
)

// The test's AWS account and keys, as the test's goaws (goawstest) takes
// them.
const (
	region    = goawstest.Region
	accessKey = goawstest.AccessKey
	// deniedKey is a key the server knows but that may not publish: it
	// is refused as SNS refuses a key its policy denies
	// (AuthorizationError).
	deniedKey = goawstest.DeniedKey
	secretKey = goawstest.SecretKey
)

// server is goaws in process: SNS and SQS on one address. A topic's
// subscription of an SQS queue with raw delivery puts each published
// message in the queue, its message attributes kept (gosns.publishSQS
// copies the Publish's attributes to the queue's message when the
// subscription is raw), so what a subscriber reads is what arrived.
type server struct{ *goawstest.Server }

func newServer(t *testing.T) *server { return &server{goawstest.Start(t)} }

// endpoint is the server's URL.
func (s *server) endpoint() string { return s.Endpoint() }

// down stops the server and returns what starts it again on the same
// address, for desttest's Down.
func (s *server) down(t testing.TB) func() { return s.Down(t) }

// publishes are the Publish requests to topicARN so far, their form.
func (s *server) publishes(topicARN string) []url.Values {
	var out []url.Values
	for _, r := range s.Sent(topicARN) {
		out = append(out, r.Fields)
	}
	return out
}

// topic is a topic of the test's own (".fifo" ends a FIFO topic's name)
// with a queue subscribed to it by raw delivery (a FIFO queue for a FIFO
// topic, as SNS requires), which subscriber reads.
func (s *server) topic(t *testing.T, fifo bool) (topicARN string, sub *subscriber) {
	t.Helper()
	ctx := context.Background()
	queue, queueURL := s.Queue(t, "webhookd-topic", fifo)
	name := strings.TrimSuffix(queue, ".fifo")
	if fifo {
		name += ".fifo"
	}
	created, err := s.SNS().CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	topicARN = aws.ToString(created.TopicArn)
	if _, err := s.SNS().Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(topicARN), Protocol: aws.String("sqs"),
		Endpoint: aws.String(goawstest.QueueARN(queue)), Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		t.Fatal(err)
	}
	return topicARN, &subscriber{srv: s, queueURL: queueURL}
}

// subscriber reads the queue subscribed to a topic.
type subscriber struct {
	srv      *server
	queueURL string
}

// Receive is desttest's Receive: the queue's next message (deleted once
// read), its message attributes as headers.
func (q *subscriber) Receive(ctx context.Context, t testing.TB) desttest.Arrived {
	t.Helper()
	got := q.srv.Await(ctx, t, q.queueURL, 1)
	if len(got) == 0 {
		t.Fatalf("no message reached the topic's queue in time")
	}
	m := got[0]
	headers := make(map[string]string, len(m.MessageAttributes))
	for name, v := range m.MessageAttributes {
		headers[strings.ToLower(name)] = aws.ToString(v.StringValue)
	}
	return desttest.Arrived{Body: []byte(aws.ToString(m.Body)), Headers: headers}
}

// unread is how many messages wait in the topic's queue (up to ten, the
// most one receive returns), taken off it: goaws puts a Publish's message
// in the subscribed queue before it answers the Publish.
func (q *subscriber) unread(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return len(q.srv.Receive(ctx, t, q.queueURL, 10))
}
