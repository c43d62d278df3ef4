package sqs

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/webhookd/webhookd/internal/destination"
)

// queuePath is what may follow an allowed prefix in a queue URL sent
// with the engine's credentials: path segments of the characters SQS
// allows in account ids and queue names, a FIFO queue's ".fifo" last.
// Nothing else (no "..", no query, no percent-encoding) so that the URL
// names the queue it seems to and no other.
var queuePath = regexp.MustCompile(`^([A-Za-z0-9_-]+/)*[A-Za-z0-9_-]+(\.fifo)?$`)

// CheckEngineQueues checks the queue URL prefixes under which sqs
// destinations may be sent with the engine's own AWS credentials
// (WEBHOOKD_SQS_ENGINE_CREDENTIALS, Options.EngineQueues): each an
// absolute http(s) URL with a host and a path ending in "/", such as
// https://sqs.eu-west-1.amazonaws.com/123456789012/. The final "/" is
// required so that an account id cannot be the beginning of another
// (…/1234 would allow …/123456789012/). The engine's configuration calls
// it before New.
func CheckEngineQueues(prefixes []string) error {
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

// engineQueueAllowed tells whether c may be sent with the engine's own
// AWS credentials under prefixes: its queue_url is one of the prefixes
// followed by a plain queue path, and its endpoint, if it names one, is
// that queue URL's own origin (so that the engine's signed requests go
// nowhere the operator did not list). Open asks again, so that a
// publisher is never made for a queue the operator did not list.
func engineQueueAllowed(prefixes []string, c Config) bool {
	for _, p := range prefixes {
		rest, ok := strings.CutPrefix(c.QueueURL, p)
		if !ok || !queuePath.MatchString(rest) {
			continue
		}
		if c.Endpoint == "" || strings.TrimSuffix(c.Endpoint, "/") == origin(p) {
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

// engineCredentials are the engine's own AWS credentials, for the
// destinations without an access key whose queue the operator listed.
// They come from the standard AWS chain (environment, shared config, web
// identity, ECS or EC2 role), loaded at the first message that needs
// them and never before, so that an operator who does not use them has
// nothing looked up; a failed load is tried again at the next. The
// chain's own calls (IMDS at 169.254.169.254, the ECS agent, STS) use the
// SDK's HTTP client: they must reach the link-local addresses the
// deliveries' dialer refuses. The SQS requests signed with them still go
// through env.Dial (open). It is an aws.CredentialsProvider shared by
// every publisher of the kind: one chain, one refresh for all.
type engineCredentials struct {
	// load reads the chain (config.LoadDefaultConfig; tests replace it).
	load func(ctx context.Context) (aws.Config, error)

	mu sync.Mutex
	// chain is the loaded chain's cache; nil until loaded.
	chain aws.CredentialsProvider
}

// newEngineCredentials is the engine's credentials, not loaded yet.
func newEngineCredentials() *engineCredentials {
	return &engineCredentials{load: func(ctx context.Context) (aws.Config, error) {
		return config.LoadDefaultConfig(ctx)
	}}
}

// loaded is the chain, loaded now if it was not. A chain that cannot be
// loaded is auth_failed with what happened; what the chain met (a file,
// an address) is for the log alone.
func (e *engineCredentials) loaded(ctx context.Context) (aws.CredentialsProvider, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.chain != nil {
		return e.chain, nil
	}
	cfg, err := e.load(ctx)
	if err == nil && cfg.Credentials == nil {
		err = errors.New("the chain found no credentials")
	}
	if err != nil {
		return nil, destination.Fail(destination.CodeAuthFailed, "this server's own AWS credentials could not be loaded", err)
	}
	e.chain = cfg.Credentials
	return e.chain, nil
}

// Retrieve implements aws.CredentialsProvider: the chain's credentials,
// or why there are none as auth_failed. The SDK wraps a failure to
// retrieve them (no role, IMDS unreachable, an expired web identity
// token) into the request's error, which would otherwise read as an
// unreachable broker; awsdest.Classify keeps a *destination.Failure as
// it is.
func (e *engineCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	chain, err := e.loaded(ctx)
	if err != nil {
		return aws.Credentials{}, err
	}
	c, err := chain.Retrieve(ctx)
	if err != nil {
		return c, destination.Fail(destination.CodeAuthFailed, "this server's own AWS credentials could not be had", err)
	}
	return c, nil
}
