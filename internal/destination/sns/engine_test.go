package sns_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestEveryNewKindThroughTheEngine: sns, a kind added as a plug-in,
// through the engine (dispatchertest.ThroughTheEngine): an event arrives
// once, its signature verified, its delivery confirmed on one attempt; an
// event of a type the subscription does not take makes no delivery; the
// target down, failed attempts in words a merchant may read, and back,
// the event, once; send_test_event arrives, verified.
func TestEveryNewKindThroughTheEngine(t *testing.T) {
	dispatchertest.ThroughTheEngine(t, "sns", reachSNS)
}

// reachSNS: a topic of the test's own on the test's goaws (server), with
// a queue subscribed to it by raw delivery, which keeps the Publish's
// message attributes on the queue's message.
func reachSNS(t *testing.T) dispatchertest.KindTarget {
	srv := newServer(t)
	topicARN, sub := srv.topic(t, false)
	proxy, down, up := dispatchertest.Proxied(t, srv.addr)
	return dispatchertest.KindTarget{
		Destination: map[string]any{"type": "sns", "topic_arn": topicARN, "region": region,
			"access_key_id": accessKey, "secret_access_key": secretKey, "endpoint": "http://" + proxy.Addr},
		Answer:  regexp.MustCompile(`^confirmed by SNS \(message id [^)]+\)$`),
		Receive: sub.Receive,
		Unread:  sub.unread,
		Down:    down, Up: up,
	}
}

// unread is how many messages wait in the topic's queue (up to ten, the
// most one receive returns), taken off it: goaws puts a Publish's message
// in the subscribed queue before it answers the Publish.
func (q *subscriber) unread(t testing.TB) int {
	t.Helper()
	c := q.srv.sqsClient()
	ctx := context.Background()
	res, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.queueURL), MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatalf("receive from the topic's queue: %v", err)
	}
	for _, m := range res.Messages {
		if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	return len(res.Messages)
}
