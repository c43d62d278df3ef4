// Package s3 is the destination kind "s3": each delivery (or batch) is
// one object put in an Amazon S3 bucket, or a compatible server's, its
// body the delivery's body as an HTTP delivery carries it and its
// headers the object's user metadata (x-amz-meta-*), so that a consumer
// reading the bucket verifies the signature as a webhook receiver does.
package s3

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/destination/awsdest"
	"github.com/webhookd/webhookd/internal/invalid"
)

// Kind is the s3 destination kind.
type Kind struct{}

// New is the s3 kind, for the registry.
func New() destination.Kind { return Kind{} }

// Metadata implements destination.Kind.
func (Kind) Metadata() destination.Metadata {
	fields := []destination.Field{
		{Name: "bucket", Label: "Bucket", Type: destination.FieldString, Required: true, Example: "acme-webhooks",
			Help: "The S3 bucket the objects are put in: 3 to 63 lowercase letters, digits, dots and hyphens."},
		{Name: "key_template", Label: "Object key template", Type: destination.FieldString, Example: DefaultKeyTemplate,
			Help: "Where each object is put in the bucket. Placeholders: {event_type} {event_id} {delivery_id} {date} (UTC, YYYY-MM-DD) {hour} (UTC, 00-23); " +
				"the rest letters, digits and / _ . -; it must hold {delivery_id} or {event_id}. Default: " + DefaultKeyTemplate + "."},
	}
	return destination.Metadata{
		Type:     "s3",
		Label:    "Amazon S3",
		Short:    "S3",
		Delivers: "one object per delivery (or per batch) in an S3 bucket, the headers as its user metadata",
		Fields:   append(fields, awsdest.Fields("s3:PutObject")...),
		// Objects have no order: a consumer lists keys, which sort by
		// name, not by arrival.
		Ordered: false,
		// A batch is one object (its key's {event_type} is "batch", its
		// {delivery_id} and {event_id} the first delivery's): an object
		// is a file, whose size S3 does not bound as a broker bounds a
		// message.
		Batches: true,
	}
}

// Config is an s3 destination: the account, the bucket and where in it
// each object goes. Its JSON is its stored form; it holds the secret
// key, which its String, GoString and LogValue never show.
type Config struct {
	awsdest.Account
	// Bucket is the bucket's name.
	Bucket string `json:"bucket"`
	// KeyTemplate is the objects' key template, "" for
	// DefaultKeyTemplate.
	KeyTemplate string `json:"key_template,omitempty"`
}

// bucketName is S3's rule of a general purpose bucket's name, less the
// rules a regexp cannot say (checked by checkBucket).
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// ipForm is a name formatted as an IPv4 address, which S3 refuses as a
// bucket name.
var ipForm = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$`)

// reservedPrefixes and reservedSuffixes are what S3 keeps for itself
// (access points, directory and table buckets, its own examples).
var (
	reservedPrefixes = []string{"xn--", "sthree-", "amzn-s3-demo-"}
	reservedSuffixes = []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"}
)

// Parse implements destination.Kind.
func (Kind) Parse(param string, raw json.RawMessage) (destination.Config, error) {
	var c Config
	if err := destination.Decode(param, raw, &c); err != nil {
		return nil, err
	}
	if err := checkBucket(param+".bucket", c.Bucket); err != nil {
		return nil, err
	}
	if c.KeyTemplate != "" {
		if _, err := ParseKeyTemplate(param+".key_template", c.KeyTemplate); err != nil {
			return nil, err
		}
	}
	if err := c.Account.Check(param); err != nil {
		return nil, err
	}
	return c, nil
}

func checkBucket(param, v string) error {
	if v == "" {
		return invalid.Missing(param)
	}
	bad := !bucketName.MatchString(v) || strings.Contains(v, "..") || ipForm.MatchString(v) || net.ParseIP(v) != nil
	for _, p := range reservedPrefixes {
		bad = bad || strings.HasPrefix(v, p)
	}
	for _, s := range reservedSuffixes {
		bad = bad || strings.HasSuffix(v, s)
	}
	if bad {
		return invalid.Value(param, "destination_bucket_invalid", param+
			" must be an S3 bucket name: 3 to 63 lowercase letters, digits, dots and hyphens, beginning and ending with a letter or digit, "+
			"without two dots in a row, not an IP address, and without a prefix or suffix S3 reserves.")
	}
	return nil
}

// template is the config's key template, parsed; Parse checked it.
func (c Config) template() KeyTemplate {
	t, err := ParseKeyTemplate("key_template", c.keyTemplate())
	if err != nil {
		// Unreachable for a Config Parse returned.
		return KeyTemplate{}
	}
	return t
}

func (c Config) keyTemplate() string {
	if c.KeyTemplate == "" {
		return DefaultKeyTemplate
	}
	return c.KeyTemplate
}

// Summary implements destination.Config: the key template shown is the
// one in force, the default when none was set.
func (c Config) Summary() map[string]any {
	s := map[string]any{"bucket": c.Bucket, "key_template": c.keyTemplate()}
	c.Account.Summarize(s)
	return s
}

// Target implements destination.Config: the bucket and key template,
// and where the bucket is (the region, or the endpoint set in its
// place).
func (c Config) Target() string {
	where := c.Region
	if c.Endpoint != "" {
		where = c.Endpoint
	}
	return fmt.Sprintf("s3://%s/%s (%s)", c.Bucket, c.keyTemplate(), where)
}

// Addresses implements destination.Config: the endpoint, when set.
func (c Config) Addresses() []destination.Address { return c.Account.Addresses() }

// Plaintext implements destination.Config: "endpoint" when it is
// http://.
func (c Config) Plaintext() string { return c.Account.Plaintext() }

// String is the target: never the secret key.
func (c Config) String() string { return c.Target() }

// GoString is the summary, its secret masked, for %#v.
func (c Config) GoString() string { return fmt.Sprintf("s3.Config%v", c.Summary()) }

// LogValue is the summary, its secret masked, for slog.
func (c Config) LogValue() slog.Value {
	summary := c.Summary()
	attrs := make([]slog.Attr, 0, len(summary))
	for _, k := range slices.Sorted(maps.Keys(summary)) {
		attrs = append(attrs, slog.Any(k, summary[k]))
	}
	return slog.GroupValue(attrs...)
}
