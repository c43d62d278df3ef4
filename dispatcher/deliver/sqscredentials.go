package deliver

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/webhookd/webhookd/internal/failtext"
	"github.com/webhookd/webhookd/internal/subscriptions"
)

// engineCredentials are the engine's own AWS credentials, for the sqs
// destinations without an access key whose queue the operator listed
// (WEBHOOKD_SQS_ENGINE_CREDENTIALS). They come from the standard AWS
// chain (environment, shared config, web identity, ECS or EC2 role),
// loaded at the first destination that needs them and never before, so
// that an operator who does not use them has nothing looked up. The
// chain's own calls (IMDS at 169.254.169.254, the ECS agent, STS) use the
// SDK's HTTP client: they must reach the link-local addresses the
// deliveries' dialer refuses. The SQS requests signed with them still go
// through the deliveries' dialer (newSQS).
type engineCredentials struct {
	// queues are the allowed queue URL prefixes; none: never used.
	queues []string
	// load reads the chain (config.LoadDefaultConfig; tests may replace it).
	load func(ctx context.Context) (aws.Config, error)

	mu sync.Mutex
	// provider is the loaded chain's cache, shared by every destination
	// (one refresh for all); nil until loaded.
	provider aws.CredentialsProvider
}

// newEngineCredentials allows the engine's credentials for queues.
func newEngineCredentials(queues []string) *engineCredentials {
	return &engineCredentials{queues: queues, load: func(ctx context.Context) (aws.Config, error) {
		return config.LoadDefaultConfig(ctx)
	}}
}

// forDestination is who signs d's requests: its own key when it has one
// (always preferred), else the engine's credentials if its queue is
// still allowed. A refusal or a chain that cannot be loaded is
// auth_failed with what to do; a failed load is tried again at the next
// attempt.
func (e *engineCredentials) forDestination(ctx context.Context, d subscriptions.Destination) (aws.CredentialsProvider, error) {
	if d.AccessKeyID != "" || d.SecretAccessKey != "" {
		return credentials.NewStaticCredentialsProvider(d.AccessKeyID, d.SecretAccessKey, ""), nil
	}
	if e == nil || !subscriptions.SQSEngineQueueAllowed(e.queues, d) {
		return nil, failed(errAuthFailed, failtext.Told("the destination has no access key and this server's own AWS credentials "+
			"are not allowed for its queue (WEBHOOKD_SQS_ENGINE_CREDENTIALS): give the destination an access key"))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.provider != nil {
		return e.provider, nil
	}
	cfg, err := e.load(ctx)
	if err == nil && cfg.Credentials == nil {
		err = errors.New("the chain found no credentials")
	}
	if err != nil {
		// What the chain met (a file, an address) is for the log.
		return nil, failed(errAuthFailed, fmt.Errorf("%w: %w", failtext.Told("this server's own AWS credentials could not be loaded"), err))
	}
	e.provider = engineProvider{cfg.Credentials}
	return e.provider, nil
}

// engineProvider is the engine's credentials with their errors marked
// auth_failed: the SDK wraps a failure to retrieve them (no role, IMDS
// unreachable, an expired web identity token) into the request's error,
// which would otherwise read as an unreachable broker.
type engineProvider struct{ aws.CredentialsProvider }

// Retrieve is the chain's credentials, or why there are none.
func (p engineProvider) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := p.CredentialsProvider.Retrieve(ctx)
	if err != nil {
		return c, failed(errAuthFailed, fmt.Errorf("%w: %w", failtext.Told("this server's own AWS credentials could not be had"), err))
	}
	return c, nil
}
