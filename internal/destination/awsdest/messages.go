package awsdest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/internal/destination"
)

// Limits SQS and SNS share.
const (
	// MaxAttributes is how many message attributes a message takes.
	MaxAttributes = 10
	// maxGroupID bounds a FIFO message group id, in characters.
	maxGroupID = 128
)

// firstAttributes are the headers a message carries before any other:
// what a consumer needs to verify and order it.
var firstAttributes = []string{"webhook-id", "webhook-timestamp", "webhook-signature", "content-type",
	"webhook-ordering-key", "webhook-sequence"}

// AttributeNames are the headers a message of service ("SQS", "SNS")
// carries as message attributes, in order, at most MaxAttributes: the
// ones a consumer verifies and orders by first, then the subscription's
// own headers by name, then user-agent if room is left. An empty value
// is left out: the services refuse one, and an empty header is the same
// as none to a verifier. More than the limit without user-agent is
// broker_refused, naming the limit, rather than a message missing one of
// the merchant's headers.
func AttributeNames(service string, headers map[string]string) ([]string, error) {
	var names []string
	for _, n := range firstAttributes {
		if _, ok := headers[n]; ok {
			names = append(names, n)
		}
	}
	var custom []string
	for n := range headers {
		if !slices.Contains(firstAttributes, n) && n != "user-agent" {
			custom = append(custom, n)
		}
	}
	slices.Sort(custom)
	names = append(names, custom...)
	if len(names) > MaxAttributes {
		said := fmt.Sprintf("an %s message takes at most %d message attributes and this one needs %d "+
			"(the Standard Webhooks headers, content-type, the ordering headers and %d of the subscription's own headers)",
			service, MaxAttributes, len(names), len(custom))
		return nil, destination.Fail(destination.CodeRefused, said, errors.New(said))
	}
	if _, ok := headers["user-agent"]; ok && len(names) < MaxAttributes {
		names = append(names, "user-agent")
	}
	return slices.DeleteFunc(names, func(n string) bool { return headers[n] == "" }), nil
}

// GroupID is a FIFO message's group: the ordering key of an ordered
// delivery, so that the service keeps each key's order as webhookd does,
// and the delivery id otherwise. Unordered deliveries promise no order
// (a retry already overtakes later events), so one fixed group would only
// make a consumer's slow message hold up every other. A key the service
// would refuse as a group id (over 128 characters, or characters other
// than printable ASCII) is sent as the hex SHA-256 of the key: the same
// key, the same group.
func GroupID(m destination.Message) string {
	if m.OrderingKey == "" {
		return m.DeliveryID
	}
	if len(m.OrderingKey) <= maxGroupID && !strings.ContainsFunc(m.OrderingKey, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return m.OrderingKey
	}
	sum := sha256.Sum256([]byte(m.OrderingKey))
	return hex.EncodeToString(sum[:])
}

// DedupID is a FIFO message's deduplication id: the delivery id alone,
// not the attempt number, so that a retry made because the answer to an
// earlier attempt was lost (the service took the message but the answer
// never came) is dropped as a duplicate within the service's five-minute
// window instead of reaching the consumer twice.
func DedupID(m destination.Message) string { return m.DeliveryID }
