// Package goawstest runs goaws, an SQS- and SNS-compatible server, in the
// test's process on 127.0.0.1, for the sqs and sns destinations' tests:
// SQS (AWS JSON protocol) and SNS (AWS query protocol) on one address.
//
// goaws checks no credentials; the Server refuses, as AWS does, a request
// signed with another access key than AccessKey, and one signed with
// DeniedKey as a key its policy denies. It can be stopped and started
// again on the same address; queues and topics live on meanwhile, as a
// real queue's messages outlive an outage.
package goawstest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Admiral-Piett/goaws/app/models"
	"github.com/Admiral-Piett/goaws/app/router"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"
	"github.com/sirupsen/logrus"
)

// The test account, as goaws names its queues and topics.
const (
	// Region is the region of every ARN.
	Region = "eu-west-1"
	// Account is the account id of every ARN and queue URL.
	Account = "123456789012"
	// AccessKey is the one access key the server takes.
	AccessKey = "AKIAWEBHOOKDGOAWS"
	// DeniedKey is a key the server knows but that may do nothing: it is
	// refused as AWS refuses a key its policy denies.
	DeniedKey = "AKIAWEBHOOKDDENIED"
	// SecretKey goes with either key; goaws checks no signature.
	SecretKey = "goaws-takes-any-secret"
)

// goaws keeps its queues and topics in process-wide maps, some read
// without its own locks: every Server of a test binary serves one request
// at a time through this lock, and its receives never wait on the server
// (Receive polls instead), so that parallel tests neither race nor stall.
var (
	serving  sync.Mutex
	setUpEnv sync.Once
)

// Server is goaws on 127.0.0.1.
type Server struct {
	mu   sync.Mutex
	addr string
	srv  *http.Server
	// sent are the SendMessage and Publish requests it was sent.
	sent []Request
	// loseAnswers is how many SendMessage or Publish answers to lose: the
	// message is taken, then the connection closed before the answer, as
	// when the network fails after AWS stored a message.
	loseAnswers int
}

// Request is a SendMessage (SQS) or Publish (SNS) request as sent: its
// members (JSON) or form fields (query), the top-level ones as strings.
type Request struct {
	// Action is "SendMessage" or "Publish".
	Action string
	// Fields are its members: QueueUrl, MessageGroupId, TopicArn,
	// MessageAttributes.entry.1.Name…
	Fields url.Values
}

// Start serves goaws until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	setUpEnv.Do(func() {
		// Its logging turned down (a line per message), its ARNs naming the
		// test's account, and FIFO deduplication on, as AWS has it.
		logrus.SetLevel(logrus.WarnLevel)
		models.CurrentEnvironment.Region = Region
		models.CurrentEnvironment.AccountID = Account
		models.CurrentEnvironment.EnableDuplicates = true
	})
	s := &Server{}
	s.start(t, "127.0.0.1:0")
	t.Cleanup(s.Stop)
	return s
}

// start serves on addr.
func (s *Server) start(t testing.TB, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	goaws := router.New()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jsonProtocol := r.Header.Get("Content-Type") == "application/x-amz-json-1.0"
		auth := r.Header.Get("Authorization")
		switch {
		case strings.Contains(auth, "Credential="+DeniedKey+"/"):
			refuse(w, jsonProtocol, "AuthorizationError", "User is not authorized to perform this action")
			return
		case !strings.Contains(auth, "Credential="+AccessKey+"/"):
			refuse(w, jsonProtocol, "InvalidClientTokenId", "The security token included in the request is invalid.")
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		req, noted := s.note(r, body, jsonProtocol)
		if req.Action == "ReceiveMessage" {
			body = noWait(body)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		serving.Lock()
		defer serving.Unlock()
		if noted && s.loseAnswer() {
			goaws.ServeHTTP(discard{}, r)
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		goaws.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	s.mu.Lock()
	s.addr, s.srv = l.Addr().String(), srv
	s.mu.Unlock()
}

// refuse answers as AWS does a request it will not serve for who signed
// it: SQS in its JSON protocol, SNS in its query protocol.
func refuse(w http.ResponseWriter, jsonProtocol bool, code, message string) {
	if jsonProtocol {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("x-amzn-query-error", code+";Sender")
		w.WriteHeader(http.StatusBadRequest)
		exception := "com.amazon.coral.service#UnrecognizedClientException"
		if code == "AuthorizationError" {
			exception = "com.amazon.coral.service#AccessDeniedException"
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": exception, "message": message})
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, `<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>Sender</Type>`+
		`<Code>`+code+`</Code><Message>`+message+`</Message></Error>`+
		`<RequestId>00000000-0000-0000-0000-000000000000</RequestId></ErrorResponse>`)
}

// note reads a request's action and keeps a SendMessage or Publish,
// reporting whether it did.
func (s *Server) note(r *http.Request, body []byte, jsonProtocol bool) (Request, bool) {
	req := Request{Fields: url.Values{}}
	if jsonProtocol {
		_, req.Action, _ = strings.Cut(r.Header.Get("X-Amz-Target"), ".")
		var members map[string]any
		_ = json.Unmarshal(body, &members)
		for name, v := range members {
			if str, ok := v.(string); ok {
				req.Fields.Set(name, str)
			}
		}
	} else if form, err := url.ParseQuery(string(body)); err == nil {
		req.Action, req.Fields = form.Get("Action"), form
	}
	if req.Action != "SendMessage" && req.Action != "Publish" {
		return req, false
	}
	s.mu.Lock()
	s.sent = append(s.sent, req)
	s.mu.Unlock()
	return req, true
}

// noWait is a ReceiveMessage request's body with no long poll: goaws
// holds the serving lock while it serves.
func noWait(body []byte) []byte {
	var members map[string]any
	if json.Unmarshal(body, &members) != nil {
		return body
	}
	members["WaitTimeSeconds"] = 0
	out, err := json.Marshal(members)
	if err != nil {
		return body
	}
	return out
}

// loseAnswer reports whether the answer to take now is one to lose.
func (s *Server) loseAnswer() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loseAnswers > 0 {
		s.loseAnswers--
		return true
	}
	return false
}

// LoseAnswers makes the server lose its next n SendMessage or Publish
// answers.
func (s *Server) LoseAnswers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loseAnswers = n
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// Sent are the SendMessage requests to a queue URL, or the Publish
// requests to a topic ARN, so far.
func (s *Server) Sent(target string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.sent {
		if r.Fields.Get("QueueUrl") == target || r.Fields.Get("TopicArn") == target {
			out = append(out, r)
		}
	}
	return out
}

// Stop closes the listener and every connection.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

// Down stops the server and returns what starts it again on the same
// address, for desttest's Down.
func (s *Server) Down(t testing.TB) (up func()) {
	s.Stop()
	addr := s.Addr()
	return func() { s.start(t, addr) }
}

// Addr is the server's host:port, the same after a restart.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Endpoint is the server's URL, an AWS endpoint.
func (s *Server) Endpoint() string { return "http://" + s.Addr() }

// SQS is an SQS client of the server, with AccessKey.
func (s *Server) SQS() *sqs.Client {
	return sqs.New(sqs.Options{Region: Region, BaseEndpoint: aws.String(s.Endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")})
}

// SNS is an SNS client of the server, with AccessKey.
func (s *Server) SNS() *sns.Client {
	return sns.New(sns.Options{Region: Region, BaseEndpoint: aws.String(s.Endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")})
}

// Queue creates a queue named after prefix, of the test's own (a FIFO
// queue when fifo), and returns its name and URL.
func (s *Server) Queue(t testing.TB, prefix string, fifo bool) (name, queueURL string) {
	t.Helper()
	name = prefix + "-" + uuid.NewString()
	if fifo {
		name += ".fifo"
	}
	if _, err := s.SQS().CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	return name, s.Endpoint() + "/" + Account + "/" + name
}

// QueueARN is the ARN of the queue named name.
func QueueARN(name string) string { return "arn:aws:sqs:" + Region + ":" + Account + ":" + name }

// Receive takes up to max messages off a queue, deleted once read, their
// attributes and message group id with them: none when none waits.
func (s *Server) Receive(ctx context.Context, t testing.TB, queueURL string, max int32) []types.Message {
	t.Helper()
	c := s.SQS()
	res, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: max,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameMessageGroupId}})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		t.Fatalf("receive from %s: %v", queueURL, err)
	}
	for _, m := range res.Messages {
		if _, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	return res.Messages
}

// Await receives from a queue until n messages came or ctx ends, a poll
// every 20 ms, and returns what came.
func (s *Server) Await(ctx context.Context, t testing.TB, queueURL string, n int) []types.Message {
	t.Helper()
	var out []types.Message
	for len(out) < n {
		got := s.Receive(ctx, t, queueURL, int32(min(n-len(out), 10)))
		out = append(out, got...)
		if len(got) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(20 * time.Millisecond):
		}
	}
	return out
}
