// Package kinesistest runs kinesalite (an implementation of Kinesis's
// API on Node.js) for tests, of package kinesis and of the engine, and
// reads a stream's records back as a consumer does.
package kinesistest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/webhookd/webhookd/internal/destination/desttest"
	kinesisdest "github.com/webhookd/webhookd/internal/destination/kinesis"
)

// Dir is where the tests find kinesalite (an implementation of
// Kinesis's API on Node.js), below the user's home directory:
// `bash .ci/services.sh` installs it there with npm when it is missing.
// Nothing global names it: no PATH entry, no environment variable.
const Dir = ".cache/webhookd-kinesalite"

// serveKinesalite is the Node.js program a test runs: kinesalite on
// 127.0.0.1 only (its own command line listens on every interface), its
// streams in memory and ACTIVE at once, gone when the test process is
// (its standard input, a pipe from the test, ends).
const serveKinesalite = `
const kinesalite = require(process.argv[1]);
const server = kinesalite({createStreamMs: 0, deleteStreamMs: 0, updateStreamMs: 0});
server.on('error', (e) => { console.error(e.message); process.exit(1); });
server.listen(Number(process.argv[2]), '127.0.0.1', () => console.log('listening'));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
`

// Kinesalite is one kinesalite process of a test, on a port of its own
// that it keeps across a stop and a start.
type Kinesalite struct {
	module string
	port   int
	// URL is its endpoint, http://127.0.0.1:port.
	URL string

	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts kinesalite on a free port of 127.0.0.1, or fails
// t saying how to install it: a missing service fails, never skips.
func Start(t testing.TB) *Kinesalite {
	t.Helper()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatalf("kinesalite is looked for in ~/%s, but there is no home directory: %v", Dir, err)
	}
	module := filepath.Join(home, Dir, "node_modules", "kinesalite")
	if _, err := os.Stat(filepath.Join(module, "package.json")); err != nil {
		t.Fatalf("kinesalite is not installed in %s (%v): `bash .ci/services.sh` installs it with npm", module, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("kinesalite needs Node.js, which is not on PATH: `bash .ci/services.sh` installs it (%v)", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	k := &Kinesalite{module: module, port: port, URL: "http://127.0.0.1:" + strconv.Itoa(port)}
	k.Start(t)
	t.Cleanup(func() { k.Stop(t) })
	return k
}

// Start runs kinesalite again on k's port (after Stop) and waits until
// it listens.
func (k *Kinesalite) Start(t testing.TB) {
	t.Helper()
	cmd := exec.Command("node", "-e", serveKinesalite, k.module, strconv.Itoa(k.port))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = stdin // kept open until the process ends: its end stops kinesalite
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kinesalite (`bash .ci/services.sh` installs it): %v", err)
	}
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			if !said && sc.Text() == "listening" {
				said = true
				listening <- true
			}
		}
		if !said {
			listening <- false
		}
	}()
	k.cmd, k.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(k.done)
	select {
	case ok := <-listening:
		if !ok {
			<-k.done
			t.Fatalf("kinesalite ended before it listened on port %d: %s (`bash .ci/services.sh` installs it)", k.port, cmd.Stderr.(*lockedWriter))
		}
	case <-time.After(30 * time.Second):
		k.Stop(t)
		t.Fatalf("kinesalite did not listen on port %d within 30 s: %s", k.port, cmd.Stderr.(*lockedWriter))
	}
}

// Stop ends kinesalite and waits until it has; its streams are gone.
func (k *Kinesalite) Stop(t testing.TB) {
	t.Helper()
	if k.cmd == nil {
		return
	}
	_ = k.cmd.Process.Kill()
	<-k.done
	k.cmd = nil
}

// lockedWriter is a writer for a process's standard error, read by the
// test while the process may still write.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() > 8<<10 {
		return len(p), nil
	}
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// Client is the test's own Kinesis client of k: a consumer's, apart from
// the destination's.
func (k *Kinesalite) Client() *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region:       "eu-west-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDKINESALITE", "kinesalite-checks-no-secret", ""),
		BaseEndpoint: aws.String(k.URL),
		HTTPClient:   &http.Client{Timeout: 10 * time.Second},
	})
}

// CreateStream makes a stream of shards shards and waits until it is
// ACTIVE.
func (k *Kinesalite) CreateStream(t testing.TB, name string, shards int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c := k.Client()
	if _, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	w := kinesis.NewStreamExistsWaiter(c, func(o *kinesis.StreamExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)}, 15*time.Second); err != nil {
		t.Fatalf("stream %s never became active: %v", name, err)
	}
}

// Reader reads a stream's records as a consumer does: every shard from
// its start (TRIM_HORIZON), each record's data unframed. Records of one
// shard come in their sequence order.
type Reader struct {
	client *kinesis.Client
	stream string

	mu      sync.Mutex
	shards  []string
	iters   map[string]*string
	pending []desttest.Arrived
}

// NewReader reads stream of k from its start.
func NewReader(k *Kinesalite, stream string) *Reader {
	return &Reader{client: k.Client(), stream: stream}
}

// Reset forgets the shard iterators, for a server started again.
func (r *Reader) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shards, r.iters, r.pending = nil, nil, nil
}

// Receive is desttest's Receive: the next record, unframed.
func (r *Reader) Receive(ctx context.Context, t testing.TB) desttest.Arrived {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if len(r.pending) > 0 {
			got := r.pending[0]
			r.pending = r.pending[1:]
			return got
		}
		if err := r.poll(ctx, t); err != nil {
			t.Fatalf("read stream %s: %v", r.stream, err)
		}
		if len(r.pending) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no record arrived in stream %s: %v", r.stream, ctx.Err())
		case <-time.After(50 * time.Millisecond): // kinesalite has no long poll: the pace of a consumer's reads
		}
	}
}

// Unread reads every shard once from where it was left and returns how
// many records are there that Receive has not returned yet. kinesalite
// answers GetRecords with what the shard holds: once nothing more is
// sent, the count is final, with no wait.
func (r *Reader) Unread(ctx context.Context, t testing.TB) int {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.poll(ctx, t); err != nil {
		t.Fatalf("read stream %s: %v", r.stream, err)
	}
	return len(r.pending)
}

// poll reads every shard once from where it was left.
func (r *Reader) poll(ctx context.Context, t testing.TB) error {
	if r.iters == nil {
		out, err := r.client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(r.stream)})
		if err != nil {
			return fmt.Errorf("list shards: %w", err)
		}
		r.iters = map[string]*string{}
		for _, s := range out.Shards {
			it, err := r.client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(r.stream),
				ShardId: s.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			if err != nil {
				return fmt.Errorf("shard iterator: %w", err)
			}
			r.shards = append(r.shards, aws.ToString(s.ShardId))
			r.iters[aws.ToString(s.ShardId)] = it.ShardIterator
		}
	}
	for _, shard := range r.shards {
		out, err := r.client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: r.iters[shard]})
		if err != nil {
			return fmt.Errorf("get records of %s: %w", shard, err)
		}
		r.iters[shard] = out.NextShardIterator
		for _, rec := range out.Records {
			r.pending = append(r.pending, Unframe(t, rec))
		}
	}
	return nil
}

// Unframe is what a consumer does with a record: parse its data as the
// frame, take the body string's bytes as the signed payload and the
// headers as they are.
func Unframe(t testing.TB, rec types.Record) desttest.Arrived {
	t.Helper()
	var f kinesisdest.Frame
	dec := json.NewDecoder(strings.NewReader(string(rec.Data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("record %s is not a frame: %v (%q)", aws.ToString(rec.SequenceNumber), err, rec.Data)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("record %s has data past its frame", aws.ToString(rec.SequenceNumber))
	}
	return desttest.Arrived{Body: []byte(f.Body), Headers: f.Headers, Key: aws.ToString(rec.PartitionKey)}
}
