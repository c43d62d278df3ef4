package s3

import (
	"bytes"
	"context"
	"crypto/md5" // Content-MD5: S3's integrity check of a body, not a security measure
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/awsdest"
)

// MaxMetadata is S3's bound of an object's user metadata: the bytes of
// each name (without x-amz-meta-) and value, added up.
const MaxMetadata = 2 << 10

// metadataName is a header name S3 user metadata carries as it is:
// lowercase, an HTTP token.
var metadataName = regexp.MustCompile("^[a-z0-9!#$%&'*+.^_`|~-]+$")

// shownKey and shownETag are what of the key and the ETag an attempt's
// answer shows; anything else is left out of it.
var (
	shownKey  = regexp.MustCompile(`^[A-Za-z0-9/_.-]+$`)
	shownETag = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
)

// Open implements destination.Kind: the client connects at the first
// send, through env's dialer only.
func (Kind) Open(cfg destination.Config, env destination.Env) (destination.Publisher, error) {
	c, err := destination.ConfigOf[Config]("s3", cfg)
	if err != nil {
		return nil, err
	}
	acct := c.Account.Client(env)
	opts := s3sdk.Options{
		Region:       acct.Region,
		Credentials:  acct.Credentials,
		HTTPClient:   acct.HTTPClient,
		Retryer:      acct.Retryer,
		BaseEndpoint: acct.BaseEndpoint,
		// A compatible server is reached by its own address, not by a
		// bucket's name as a host of it (which needs wildcard DNS).
		UsePathStyle: c.Endpoint != "",
		APIOptions:   []func(*middleware.Stack) error{readSuccessBody},
	}
	if c.Endpoint != "" {
		// Compatible servers differ in their support of the SDK's
		// streamed trailing checksums; the body's Content-MD5, which
		// every one checks, is sent instead.
		opts.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	}
	return &Publisher{
		client:   s3sdk.New(opts),
		idle:     acct.CloseIdle,
		bucket:   c.Bucket,
		template: c.template(),
		env:      env,
	}, nil
}

// Publisher puts objects in one bucket. It is safe for concurrent use:
// the SDK's client is.
type Publisher struct {
	client   *s3sdk.Client
	idle     func()
	bucket   string
	template KeyTemplate
	env      destination.Env
	closed   atomic.Bool
}

// Send implements destination.Publisher: one PutObject, the body as is,
// the headers as user metadata, the content type the object's own.
func (p *Publisher) Send(ctx context.Context, m destination.Message) (destination.Result, error) {
	if p.closed.Load() {
		return destination.Result{}, destination.Fail(destination.CodeUnreachable, "the destination was closed", errors.New("s3: send after close"))
	}
	key := p.template.Expand(m)
	if len(key) > maxKey {
		return destination.Result{}, destination.Fail(destination.CodeRefused,
			fmt.Sprintf("the object key would be longer than the %d bytes S3 allows", maxKey), fmt.Errorf("s3: key of %d bytes", len(key)))
	}
	meta, err := Metadata(m.Headers)
	if err != nil {
		return destination.Result{}, err
	}
	if p.env.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.env.Timeout)
		defer cancel()
	}
	sum := md5.Sum(m.Body)
	in := &s3sdk.PutObjectInput{
		Bucket:        aws.String(p.bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(m.Body),
		ContentLength: aws.Int64(int64(len(m.Body))),
		ContentMD5:    aws.String(base64.StdEncoding.EncodeToString(sum[:])),
		Metadata:      meta,
	}
	if m.ContentType != "" {
		in.ContentType = aws.String(m.ContentType)
	}
	out, err := p.client.PutObject(ctx, in)
	if err != nil {
		return destination.Result{}, awsdest.Classify("S3", err)
	}
	return destination.Result{Answer: answer(key, aws.ToString(out.ETag))}, nil
}

// answer is the attempt's record of a stored object: the key and the
// ETag, each shown only when it has the shape of one.
func answer(key, etag string) string {
	var shown []string
	if len(key) <= maxKey && shownKey.MatchString(key) {
		shown = append(shown, "key "+key)
	}
	if etag = strings.Trim(etag, `"`); shownETag.MatchString(etag) {
		shown = append(shown, "ETag "+etag)
	}
	if len(shown) == 0 {
		return "stored by S3"
	}
	return "stored by S3 (" + strings.Join(shown, ", ") + ")"
}

// Close implements destination.Publisher.
func (p *Publisher) Close() error {
	p.closed.Store(true)
	p.idle()
	return nil
}

// Metadata is the user metadata that carries headers: each header but
// content-type (the object's own Content-Type), by its lowercase name.
// Headers S3 metadata cannot carry as they are (a name that is not an
// HTTP token, a value that is not printable ASCII) or more than
// MaxMetadata of them in all are a broker_refused *destination.Failure,
// in fixed words, before anything is sent.
func Metadata(headers map[string]string) (map[string]string, error) {
	meta := make(map[string]string, len(headers))
	size := 0
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		value := headers[name]
		name = strings.ToLower(name)
		if name == "content-type" {
			continue
		}
		if !metadataName.MatchString(name) {
			return nil, destination.Fail(destination.CodeRefused, "a header name cannot be carried as S3 user metadata", fmt.Errorf("s3: header name of %d bytes refused", len(name)))
		}
		if strings.ContainsFunc(value, func(r rune) bool { return r < ' ' || r > '~' }) {
			return nil, destination.Fail(destination.CodeRefused, "a header value is not printable ASCII, which S3 user metadata requires", fmt.Errorf("s3: value of header %s refused", name))
		}
		meta[name] = value
		size += len(name) + len(value)
	}
	if size > MaxMetadata {
		return nil, destination.Fail(destination.CodeRefused, "the headers are larger than the 2 KiB of user metadata S3 keeps with an object",
			fmt.Errorf("s3: %d bytes of user metadata", size))
	}
	return meta, nil
}

// readSuccessBody adds readBody to a client's requests.
func readSuccessBody(stack *middleware.Stack) error {
	return stack.Deserialize.Insert(readBody{}, "OperationDeserializer", middleware.After)
}

// readBody reads (and drops) the whole body of a successful answer
// through the client's bound before the SDK sees it. PutObject's answer has no
// body, and the SDK would drain whatever comes and drop a read error: a
// server answering 200 with an endless body would be read to its end.
// Read here, past destination.MaxServiceAnswer the send fails as
// response_too_large.
type readBody struct{}

// ID implements middleware.DeserializeMiddleware.
func (readBody) ID() string { return "webhookdReadSuccessBody" }

// HandleDeserialize implements middleware.DeserializeMiddleware.
func (readBody) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleDeserialize(ctx, in)
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if err != nil || !ok || resp.StatusCode < 200 || resp.StatusCode >= 300 || resp.Body == nil {
		return out, md, err
	}
	_, readErr := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	resp.Body = http.NoBody
	if readErr != nil {
		return out, md, fmt.Errorf("s3: read the answer: %w", readErr)
	}
	return out, md, nil
}
