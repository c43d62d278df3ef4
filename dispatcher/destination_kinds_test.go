package dispatcher_test

import (
	"context"
	"io"
	"net"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Admiral-Piett/goaws/app/models"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/eclipse/paho.golang/paho"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webhookd/webhookd/internal/destination/desttest"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/internal/testfixtures/eventbridgetest"
	"github.com/webhookd/webhookd/internal/testfixtures/kinesistest"
)

// The machine's brokers (.ci/services.sh starts them), shared with other
// tests: each row makes a stream or a topic of its own and reaches the
// broker through a tcpproxy it takes down, never stopping the broker.
const (
	natsAddr      = "127.0.0.1:4222"
	mosquittoAddr = "127.0.0.1:1883"
)

// The account of the AWS rows: goaws's topics are named in it (see
// TestEveryNewKindThroughTheEngine), and a destination's region must be
// its topic's.
const (
	awsRegion  = "eu-west-1"
	awsAccount = "123456789012"
)

// TestEveryNewKindThroughTheEngine: for each kind added as a plug-in, a
// subscription made through the API's rules (the subscriptions registry,
// with the engine's kinds) and events published through the dispatcher:
//
//  1. an event arrives once, as a consumer reads it, its signature
//     verified by package receiver; its delivery succeeded on one
//     attempt, recorded with the target's confirmation;
//  2. an event of a type the subscription does not take makes no
//     delivery, and nothing of it arrives;
//  3. the target down, attempts are recorded as failed
//     (broker_unreachable or not_confirmed) in words a merchant may
//     read; the target back, the delivery succeeds and the event arrives,
//     once;
//  4. send_test_event arrives too, verified.
//
// What arrived is counted from the target's state once the engine is
// idle: nothing is proved absent by waiting.
func TestEveryNewKindThroughTheEngine(t *testing.T) {
	storetest.FullLane(t, "needs NATS, Mosquitto and kinesalite")
	// goaws names its topics with the process's environment (placeholders
	// by default, which no sns destination accepts): set it before any
	// row starts a goaws server. The test runs alone at this point (it is
	// not parallel), and the values suit every goaws server of the
	// package: the SQS tests name their queue URLs themselves.
	newSQSServer(t) // goaws's own set-up, once per binary, first
	models.CurrentEnvironment.Region, models.CurrentEnvironment.AccountID = awsRegion, awsAccount

	rows := []struct {
		kind  string
		reach func(t *testing.T) dispatchertest.KindTarget
	}{
		{"nats", reachNATS},
		{"mqtt", reachMQTT},
		{"kinesis", reachKinesis},
		{"sns", reachSNS},
		{"eventbridge", reachEventBridge},
		{"s3", reachS3},
	}
	for _, row := range rows {
		t.Run(row.kind, func(t *testing.T) {
			t.Parallel()
			target := row.reach(t)
			dispatchertest.ThroughTheEngine(t, row.kind, target)
		})
	}
}

// reachNATS: a JetStream stream of the row's own on the machine's NATS,
// read by a durable consumer from its start.
func reachNATS(t *testing.T) dispatchertest.KindTarget {
	dispatchertest.NeedService(t, "NATS", natsAddr)
	nc, err := natsgo.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatalf("NATS on %s: %v (`bash .ci/services.sh` starts it)", natsAddr, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	id := dispatchertest.RandomName(t)
	name, subject := "WEBHOOKD_ENGINE_"+strings.ToUpper(id), "webhookd.engine."+id+".events"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.FileStorage,
		Duplicates: time.Minute}); err != nil {
		t.Fatalf("create stream (is JetStream on? `bash .ci/services.sh` starts NATS with it): %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("delete stream %s: %v", name, err)
		}
		nc.Close()
	})
	cons, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: "receiver",
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	proxy, down, up := dispatchertest.Proxied(t, natsAddr)
	return dispatchertest.KindTarget{
		Destination: map[string]any{"type": "nats", "servers": []string{proxy.Addr}, "subject": subject},
		Answer:      regexp.MustCompile(`^acknowledged by JetStream stream ` + name + `, sequence [0-9]+$`),
		Receive: func(ctx context.Context, t testing.TB) desttest.Arrived {
			t.Helper()
			msg, err := cons.Next(jetstream.FetchContext(ctx))
			if err != nil {
				t.Fatalf("no message on stream %s: %v", name, err)
			}
			headers := map[string]string{}
			for k, values := range msg.Headers() {
				headers[strings.ToLower(k)] = values[0]
			}
			if err := msg.DoubleAck(ctx); err != nil {
				t.Fatalf("acknowledge: %v", err)
			}
			return desttest.Arrived{Body: msg.Data(), Headers: headers, Key: msg.Subject()}
		},
		Unread: func(t testing.TB) int {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			info, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return int(info.NumPending) + info.NumAckPending
		},
		Down: down, Up: up,
	}
}

// reachMQTT: a topic of the row's own on the machine's Mosquitto, with a
// subscriber at QoS 1 from before anything is sent.
func reachMQTT(t *testing.T) dispatchertest.KindTarget {
	dispatchertest.NeedService(t, "Mosquitto", mosquittoAddr)
	topic := "webhookd/engine/" + dispatchertest.RandomName(t)
	sub := subscribeMQTT(t, topic)
	proxy, down, up := dispatchertest.Proxied(t, mosquittoAddr)
	return dispatchertest.KindTarget{
		Destination: map[string]any{"type": "mqtt", "broker": proxy.Addr, "topic": topic, "tls": false},
		Answer:      regexp.MustCompile(`^confirmed by the broker \(PUBACK [^)]+\)$`),
		Receive:     sub.receive,
		Unread:      sub.unread,
		Down:        down, Up: up,
	}
}

// mqttSubscriber is a consumer of one topic: a paho client subscribed at
// QoS 1, handing the messages over a channel.
type mqttSubscriber struct {
	topic  string
	client *paho.Client
	msgs   chan *paho.Publish
}

func subscribeMQTT(t *testing.T, topic string) *mqttSubscriber {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", mosquittoAddr)
	if err != nil {
		t.Fatalf("Mosquitto on %s: %v (`bash .ci/services.sh` starts it)", mosquittoAddr, err)
	}
	s := &mqttSubscriber{topic: topic, msgs: make(chan *paho.Publish, 100)}
	s.client = paho.NewClient(paho.ClientConfig{Conn: conn, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(r paho.PublishReceived) (bool, error) {
			select {
			case s.msgs <- r.Packet:
			default:
				t.Errorf("subscriber: more than %d messages waiting", cap(s.msgs))
			}
			return true, nil
		},
	}})
	if _, err := s.client.Connect(ctx, &paho.Connect{ClientID: "engine-sub-" + dispatchertest.RandomName(t), CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatalf("subscriber: connect: %v", err)
	}
	t.Cleanup(func() { _ = s.client.Disconnect(&paho.Disconnect{}) })
	if _, err := s.client.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		t.Fatalf("subscriber: subscribe: %v", err)
	}
	return s
}

// receive is the next message, its user properties as headers.
func (s *mqttSubscriber) receive(ctx context.Context, t testing.TB) desttest.Arrived {
	t.Helper()
	select {
	case m := <-s.msgs:
		headers := map[string]string{}
		if m.Properties != nil {
			for _, p := range m.Properties.User {
				headers[strings.ToLower(p.Key)] = p.Value
			}
		}
		return desttest.Arrived{Body: m.Payload, Headers: headers}
	case <-ctx.Done():
		t.Fatalf("no message arrived on %s", s.topic)
		return desttest.Arrived{}
	}
}

// unread publishes a marker to the topic and counts the messages that
// arrive before it. MQTT keeps no count of what a subscriber has not
// read; but Mosquitto forwards a topic's messages to a subscriber in the
// order it took them, and every message the engine sent was acknowledged
// (PUBACK) before the marker is published: any of them the subscriber
// has not read comes before the marker.
func (s *mqttSubscriber) unread(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	marker := "marker-" + dispatchertest.RandomName(t)
	if _, err := s.client.Publish(ctx, &paho.Publish{Topic: s.topic, QoS: 1, Payload: []byte(marker)}); err != nil {
		t.Fatalf("publish the marker: %v", err)
	}
	n := 0
	for {
		if got := s.receive(ctx, t); string(got.Body) == marker {
			return n
		}
		n++
	}
}

// reachKinesis: kinesalite (kinesistest) with a stream of one shard, so
// that its records come back in the order put.
func reachKinesis(t *testing.T) dispatchertest.KindTarget {
	k := kinesistest.Start(t)
	const stream = "webhookd-engine"
	k.CreateStream(t, stream, 1)
	r := kinesistest.NewReader(k, stream)
	proxy, down, up := dispatchertest.Proxied(t, strings.TrimPrefix(k.URL, "http://"))
	return dispatchertest.KindTarget{
		// kinesalite checks no credentials.
		Destination: map[string]any{"type": "kinesis", "stream_name": stream, "region": awsRegion,
			"access_key_id": "AKIDEXAMPLE", "secret_access_key": "kinesalite-checks-no-secret", "endpoint": "http://" + proxy.Addr},
		Answer:  regexp.MustCompile(`^confirmed by Kinesis \(sequence number [0-9]+, shard shardId-000000000000\)$`),
		Receive: r.Receive,
		Unread: func(t testing.TB) int {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return r.Unread(ctx, t)
		},
		Down: down, Up: up,
	}
}

// reachSNS: a topic on goaws (the router of sqsServer serves SNS's query
// protocol beside SQS's JSON one) with a queue subscribed to it by raw
// delivery, which keeps the Publish's message attributes on the queue's
// message.
func reachSNS(t *testing.T) dispatchertest.KindTarget {
	srv := newSQSServer(t)
	ctx := context.Background()
	creds := credentials.NewStaticCredentialsProvider(sqsAccessKey, "secret", "")
	snsClient := sns.New(sns.Options{Region: awsRegion, BaseEndpoint: aws.String(srv.endpoint()), Credentials: creds})
	sqsClient := srv.client()
	name := "webhookd-engine-" + dispatchertest.RandomName(t)
	created, err := snsClient.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	topicARN := aws.ToString(created.TopicArn)
	queue := name + "-queue"
	if _, err := sqsClient.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(queue)}); err != nil {
		t.Fatal(err)
	}
	if _, err := snsClient.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(topicARN), Protocol: aws.String("sqs"),
		Endpoint:   aws.String("arn:aws:sqs:" + awsRegion + ":" + awsAccount + ":" + queue),
		Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		t.Fatal(err)
	}
	queueURL := srv.endpoint() + "/" + awsAccount + "/" + queue
	// take reads up to ten messages (deleting them), waiting up to wait
	// seconds for one.
	take := func(ctx context.Context, t testing.TB, wait int32) []desttest.Arrived {
		t.Helper()
		res, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL),
			MaxNumberOfMessages: 10, WaitTimeSeconds: wait, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatalf("receive from the topic's queue: %v", err)
		}
		var out []desttest.Arrived
		for _, m := range res.Messages {
			if _, err := sqsClient.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
			headers := map[string]string{}
			for k, v := range m.MessageAttributes {
				headers[strings.ToLower(k)] = aws.ToString(v.StringValue)
			}
			out = append(out, desttest.Arrived{Body: []byte(aws.ToString(m.Body)), Headers: headers})
		}
		return out
	}
	var mu sync.Mutex
	var pending []desttest.Arrived
	proxy, down, up := dispatchertest.Proxied(t, srv.addr)
	return dispatchertest.KindTarget{
		Destination: map[string]any{"type": "sns", "topic_arn": topicARN, "region": awsRegion,
			"access_key_id": sqsAccessKey, "secret_access_key": "secret", "endpoint": "http://" + proxy.Addr},
		Answer: regexp.MustCompile(`^confirmed by SNS \(message id [^)]+\)$`),
		Receive: func(ctx context.Context, t testing.TB) desttest.Arrived {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			for len(pending) == 0 {
				if ctx.Err() != nil {
					t.Fatalf("no message reached the topic's queue")
				}
				pending = take(ctx, t, 1)
			}
			got := pending[0]
			pending = pending[1:]
			return got
		},
		Unread: func(t testing.TB) int {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			// goaws puts a Publish's message in the subscribed queue before
			// it answers the Publish.
			return len(pending) + len(take(context.Background(), t, 0))
		},
		Down: down, Up: up,
	}
}

// reachEventBridge: the PutEvents stand-in (eventbridgetest); no
// EventBridge emulator is packaged where the project installs from.
func reachEventBridge(t *testing.T) dispatchertest.KindTarget {
	s := eventbridgetest.New(t)
	proxy, down, up := dispatchertest.Proxied(t, strings.TrimPrefix(s.URL(), "http://"))
	return dispatchertest.KindTarget{
		Destination: map[string]any{"type": "eventbridge", "event_bus": eventbridgetest.Bus, "region": eventbridgetest.Region,
			"access_key_id": eventbridgetest.Key, "secret_access_key": eventbridgetest.Secret, "endpoint": "http://" + proxy.Addr},
		Answer:  regexp.MustCompile(`^confirmed by EventBridge \(event id [0-9a-f-]+\)$`),
		Receive: s.Receive,
		Unread:  func(testing.TB) int { return s.Waiting() },
		Down:    down, Up: up,
	}
}

// reachS3: gofakes3 (its in-memory backend) in process, a bucket read by
// a consumer that lists it and reads each object it has not read yet.
func reachS3(t *testing.T) dispatchertest.KindTarget {
	const bucket = "webhookd-engine"
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	consumer := s3sdk.New(s3sdk.Options{Region: awsRegion, BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAWEBHOOKDS3TEST", "s3-test-secret", ""), Retryer: aws.NopRetryer{}})
	var mu sync.Mutex
	seen := map[string]bool{}
	// unseen are the keys of the bucket not read yet, in order.
	unseen := func(ctx context.Context, t testing.TB) []string {
		t.Helper()
		var keys []string
		pages := s3sdk.NewListObjectsV2Paginator(consumer, &s3sdk.ListObjectsV2Input{Bucket: aws.String(bucket)})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				t.Fatalf("list the bucket: %v", err)
			}
			for _, o := range page.Contents {
				if !seen[aws.ToString(o.Key)] {
					keys = append(keys, aws.ToString(o.Key))
				}
			}
		}
		slices.Sort(keys)
		return keys
	}
	proxy, down, up := dispatchertest.Proxied(t, srv.Listener.Addr().String())
	return dispatchertest.KindTarget{
		Destination: map[string]any{"type": "s3", "bucket": bucket, "region": awsRegion,
			"access_key_id": "AKIAWEBHOOKDS3TEST", "secret_access_key": "s3-test-secret", "endpoint": "http://" + proxy.Addr},
		Answer: regexp.MustCompile(`^stored by S3 \(key [^,]+, ETag [0-9a-f]+\)$`),
		Receive: func(ctx context.Context, t testing.TB) desttest.Arrived {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			for {
				if keys := unseen(ctx, t); len(keys) > 0 {
					obj, err := consumer.GetObject(ctx, &s3sdk.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(keys[0])})
					if err != nil {
						t.Fatalf("get object: %v", err)
					}
					body, err := io.ReadAll(obj.Body)
					_ = obj.Body.Close()
					if err != nil {
						t.Fatalf("read object: %v", err)
					}
					seen[keys[0]] = true
					headers := map[string]string{"content-type": aws.ToString(obj.ContentType)}
					for k, v := range obj.Metadata {
						headers[strings.ToLower(k)] = v
					}
					return desttest.Arrived{Body: body, Headers: headers, Key: keys[0]}
				}
				select {
				case <-ctx.Done():
					t.Fatalf("no new object in the bucket: %v", ctx.Err())
				case <-time.After(50 * time.Millisecond): // the pace of a consumer's listing
				}
			}
		},
		Unread: func(t testing.TB) int {
			t.Helper()
			mu.Lock()
			defer mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return len(unseen(ctx, t))
		},
		Down: down, Up: up,
	}
}
