package kinesis

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/awsdest"
)

// Kinesis's limits on one record.
const (
	// MaxRecord is the most a record may hold: its data and its
	// partition key's UTF-8 bytes together (1 MiB).
	MaxRecord = 1 << 20
	// MaxPartitionKey is the longest partition key Kinesis takes: 256
	// characters, counted here as UTF-16 code units (as Kinesis's Java
	// service and kinesalite count them; a character outside the Basic
	// Multilingual Plane is two), so that no key Kinesis would refuse is
	// sent. A longer key is sent as its SHA-256 (hex).
	MaxPartitionKey = 256
)

// Frame is a record's data: what a Kinesis record cannot carry beside
// its data (the delivery's headers) and the body as signed. A consumer
// parses the record's data as this JSON object, takes Body's UTF-8 bytes
// as the signed payload, and verifies them with Headers' webhook-id,
// webhook-timestamp and webhook-signature, as a webhook receiver does.
type Frame struct {
	// Headers are the delivery's headers, names in lowercase.
	Headers map[string]string `json:"headers"`
	// Body is the body exactly as signed, as a JSON string.
	Body string `json:"body"`
}

// Fixed words of failures that no answer of Kinesis caused.
const (
	saidTooLarge = "the message is larger than a Kinesis record takes (1 MiB with its partition key); nothing was sent"
	saidNotText  = "the body is not UTF-8 text, which a Kinesis record's JSON frame carries; nothing was sent"
	saidClosed   = "the destination's publisher is closed; nothing was sent"
	saidNoSeq    = "Kinesis answered without a sequence number and shard of its own form"
)

// errClosed is a Send after Close.
var errClosed = errors.New("kinesis publisher closed")

// The answer's values, as Kinesis writes them, checked before they are
// shown to the merchant: a compatible endpoint may answer anything.
var (
	sequenceNumber = regexp.MustCompile(`^[0-9]{1,128}$`)
	shardID        = regexp.MustCompile(`^shardId-[0-9]{1,20}$`)
)

// Open implements destination.Kind: a Kinesis client on the account's
// options (env's dialer, bounded answers, no retry of the SDK's own).
// It connects at the first Send.
func (Kind) Open(cfg destination.Config, env destination.Env) (destination.Publisher, error) {
	c, err := destination.ConfigOf[Config]("kinesis", cfg)
	if err != nil {
		return nil, err
	}
	opts := c.Client(env)
	client := kinesis.New(kinesis.Options{
		Region:       opts.Region,
		Credentials:  opts.Credentials,
		HTTPClient:   opts.HTTPClient,
		Retryer:      opts.Retryer,
		BaseEndpoint: opts.BaseEndpoint,
		AppID:        appID(env.Version),
	})
	return &publisher{stream: c.StreamName, client: client, opts: opts, env: env}, nil
}

// appID is the engine's name in the SDK's User-Agent: "webhookd" and its
// version when that is a plain token.
func appID(version string) string {
	if version == "" || len(version) > 40 || strings.ContainsFunc(version, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-+_", r))
	}) {
		return "webhookd"
	}
	return "webhookd-" + version
}

// publisher puts one record per Send. The SDK's client is safe for
// concurrent use; the engine sends one message of an ordering key at a
// time, so a key's records are put, and sequenced by Kinesis, in order.
type publisher struct {
	stream string
	client *kinesis.Client
	opts   awsdest.Client
	env    destination.Env
	closed atomic.Bool
}

// Send implements destination.Publisher.
func (p *publisher) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	if p.closed.Load() {
		return destination.Result{}, destination.Fail(destination.CodeUnreachable, saidClosed, errClosed)
	}
	data, err := frame(m)
	if err != nil {
		return destination.Result{}, err
	}
	key := partitionKey(m.PartitionKey())
	if len(data)+len(key) > MaxRecord {
		return destination.Result{}, destination.Fail(destination.CodeRefused, saidTooLarge,
			fmt.Errorf("kinesis record of %d bytes with its partition key, over %d", len(data)+len(key), MaxRecord))
	}
	if p.env.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.env.Timeout)
		defer cancel()
	}
	out, err := p.client.PutRecord(ctx, &kinesis.PutRecordInput{
		StreamName:   aws.String(p.stream),
		Data:         data,
		PartitionKey: aws.String(key),
	})
	if err != nil {
		return destination.Result{}, classify(err)
	}
	answer, err := confirmed(aws.ToString(out.SequenceNumber), aws.ToString(out.ShardId))
	if err != nil {
		return destination.Result{}, err
	}
	return destination.Result{Answer: answer}, nil
}

// Close implements destination.Publisher: later Sends fail, idle
// connections close.
func (p *publisher) Close() error {
	p.closed.Store(true)
	p.opts.CloseIdle()
	return nil
}

// classify is awsdest.Classify for Kinesis.
func classify(err error) error { return awsdest.Classify("Kinesis", err) }

// frame is m's record data: a Frame of its headers (names lowercased, the
// content type added when the headers lack it) and its body. A body that
// is not UTF-8 cannot be a JSON string byte for byte (the encoder would
// replace what is not), so it is refused rather than changed under its
// signature; webhookd's bodies, JSON or a compact JWE, always are.
func frame(m destination.Message) ([]byte, error) {
	if !utf8.Valid(m.Body) {
		return nil, destination.Fail(destination.CodeRefused, saidNotText, errors.New("kinesis: body is not UTF-8"))
	}
	headers := make(map[string]string, len(m.Headers)+1)
	for name, value := range m.Headers {
		headers[strings.ToLower(name)] = value
	}
	if _, ok := headers["content-type"]; !ok && m.ContentType != "" {
		headers["content-type"] = m.ContentType
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Kept as written: a consumer reading the record by eye sees the
	// body's own characters; parsing gives the same string either way.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(Frame{Headers: headers, Body: string(m.Body)}); err != nil {
		return nil, fmt.Errorf("kinesis: frame the message: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// partitionKey is the record's partition key: key itself when Kinesis
// takes it (UTF-8 of 1 to MaxPartitionKey UTF-16 code units), else its
// SHA-256 in hex, the same for the same key, so that one ordering key's
// records still share a shard.
func partitionKey(key string) string {
	if key != "" && utf8.ValidString(key) && utf16Len(key) <= MaxPartitionKey {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// utf16Len is how many UTF-16 code units s is.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// confirmed is the attempt's answer from PutRecord's: the record's
// sequence number and shard, shown only when they have Kinesis's form.
// An answer without them is no confirmation (Kinesis always gives both
// for a record it stored).
func confirmed(seq, shard string) (string, error) {
	if !sequenceNumber.MatchString(seq) || !shardID.MatchString(shard) {
		return "", destination.Fail(destination.CodeNotConfirmed, saidNoSeq,
			errors.New("kinesis: PutRecord answered without a valid sequence number and shard id"))
	}
	return "confirmed by Kinesis (sequence number " + seq + ", shard " + shard + ")", nil
}
