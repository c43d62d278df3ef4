package subscriptions

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/webhookd/webhookd/internal/invalid"
)

// EngineCredentials is what a read of an sqs destination without an
// access key shows as its "credentials": its messages are signed with the
// engine's own AWS credentials.
const EngineCredentials = "engine"

// sqsQueuePath is what may follow an allowed prefix in a queue URL sent
// with the engine's credentials: path segments of the characters SQS
// allows in account ids and queue names, a FIFO queue's ".fifo" last.
// Nothing else (no "..", no query, no percent-encoding) so that the URL
// names the queue it seems to and no other.
var sqsQueuePath = regexp.MustCompile(`^([A-Za-z0-9_-]+/)*[A-Za-z0-9_-]+(\.fifo)?$`)

// CheckSQSEngineQueues checks the queue URL prefixes under which sqs
// destinations may be sent with the engine's own AWS credentials
// (WEBHOOKD_SQS_ENGINE_CREDENTIALS): each an absolute http(s) URL with a
// host and a path ending in "/", such as
// https://sqs.eu-west-1.amazonaws.com/123456789012/. The final "/" is
// required so that an account id cannot be the beginning of another
// (…/1234 would allow …/123456789012/).
func CheckSQSEngineQueues(prefixes []string) error {
	for _, p := range prefixes {
		u, err := url.Parse(p)
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "":
			return fmt.Errorf("%q is not a queue URL prefix such as https://sqs.eu-west-1.amazonaws.com/123456789012/", p)
		case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.Contains(p, "#") || strings.Contains(p, "?"):
			return fmt.Errorf("%q must have no credentials, query or fragment", p)
		case !strings.HasSuffix(u.Path, "/"):
			return fmt.Errorf("%q must end with \"/\" (as in https://sqs.eu-west-1.amazonaws.com/123456789012/), "+
				"so that it cannot also match an account or queue whose name merely starts the same", p)
		case strings.Contains(u.Path, "/../") || strings.Contains(u.Path, "/./") || strings.Contains(u.Path, "//"):
			return fmt.Errorf("%q must not contain empty, \".\" or \"..\" path segments", p)
		}
	}
	return nil
}

// SQSEngineQueueAllowed tells whether d, an sqs destination, may be sent
// with the engine's own AWS credentials under prefixes: its queue_url is
// one of the prefixes followed by a plain queue path, and its endpoint,
// if it names one, is that queue URL's own origin (so that the engine's
// signed requests go nowhere the operator did not list). The dispatcher
// asks again at each client it builds, so that a prefix the operator
// removed stops the deliveries of subscriptions made under it.
func SQSEngineQueueAllowed(prefixes []string, d Destination) bool {
	for _, p := range prefixes {
		rest, ok := strings.CutPrefix(d.QueueURL, p)
		if !ok || !sqsQueuePath.MatchString(rest) {
			continue
		}
		if d.Endpoint == "" || strings.TrimSuffix(d.Endpoint, "/") == origin(p) {
			return true
		}
	}
	return false
}

// origin is a checked prefix's scheme://host[:port].
func origin(prefix string) string {
	u, err := url.Parse(prefix)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// giveSQSKey is the part of the refusal of an sqs destination without
// an access key that says what to do.
const giveSQSKey = "give access_key_id and secret_access_key of an IAM user allowed sqs:SendMessage on the queue"

// sqsCredentials checks who signs an sqs destination's messages and adds
// it to summary: its own access key when it has one (always preferred),
// both parts then required; without one, the engine's own AWS
// credentials, only when the operator allows them for its queue
// (Rules.SQSEngineQueues). A destination shown with the engine's
// credentials shows no key at all.
func (c checker) sqsCredentials(param string, d *Destination, summary map[string]any) error {
	if d.AccessKeyID == "" && d.SecretAccessKey == "" {
		switch {
		case len(c.rules.SQSEngineQueues) == 0:
			missing := invalid.Missing(param + ".access_key_id")
			missing.Message = fmt.Sprintf("%s.access_key_id is required: %s.", param, giveSQSKey)
			return missing
		case !SQSEngineQueueAllowed(c.rules.SQSEngineQueues, *d):
			return invalid.Value(param+".access_key_id", "destination_engine_credentials_refused", fmt.Sprintf(
				"%s.access_key_id is required for this queue: this server sends with its own AWS credentials only to the queues its operator "+
					"listed, and %s.queue_url is not one of them (an endpoint, if given, must be the queue URL's own origin); %s.",
				param, param, giveSQSKey))
		}
		summary["credentials"] = EngineCredentials
		return nil
	}
	// Both parts were checked with the destination's shape (checkSQS).
	// The secret reads as every secret does: no part of it shown.
	summary["access_key_id"] = d.AccessKeyID
	summary["secret_access_key"] = maskedSecret
	return nil
}
