// Package awsdest is what the destination kinds of Amazon's services
// (sqs, sns, kinesis, s3, eventbridge) share: the account fields (region,
// access key, endpoint) and their rules, the SDK's client options built
// on the destination's Env, and the mapping of the SDK's errors to the
// attempt error codes.
package awsdest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/webhookd/webhookd/internal/destination"
	"github.com/webhookd/webhookd/internal/failtext"
	"github.com/webhookd/webhookd/internal/invalid"
)

// maxIdleConns bounds the connections one destination keeps to its
// service.
const maxIdleConns = 16

var region = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)

// Account is who sends and where: the fields every AWS kind takes.
type Account struct {
	// Region is the service's region (eu-west-1).
	Region string `json:"region"`
	// AccessKeyID and SecretAccessKey are an IAM user's key.
	AccessKeyID     string `json:"access_key_id,omitempty"`
	SecretAccessKey string `json:"secret_access_key,omitempty"`
	// Endpoint replaces the service's own address (an https URL), for a
	// compatible server.
	Endpoint string `json:"endpoint,omitempty"`
}

// Fields are the account's fields, for a kind's Metadata; action names
// the IAM action the key needs ("sns:Publish").
func Fields(action string) []destination.Field {
	return []destination.Field{
		{Name: "region", Label: "Region", Type: destination.FieldString, Required: true, Example: "eu-west-1", Help: "The AWS region of the resource."},
		{Name: "access_key_id", Label: "Access key ID", Type: destination.FieldString, Required: true,
			Help: "An IAM user's access key, allowed " + action + " on the resource and nothing else."},
		{Name: "secret_access_key", Label: "Secret access key", Type: destination.FieldString, Required: true, Secret: true},
		{Name: "endpoint", Label: "Endpoint", Type: destination.FieldString, Example: "https://vpce-0123.example.com",
			Help: "Only for a compatible server or a VPC endpoint: the service's own address is used otherwise."},
	}
}

// Check applies the account's rules under param: a region, both parts of
// the key, an endpoint that is an https URL (ServiceURL).
func (a Account) Check(param string) error {
	switch {
	case a.Region == "":
		return invalid.Missing(param + ".region")
	case !region.MatchString(a.Region):
		return invalid.Value(param+".region", "destination_region_invalid", param+".region must be an AWS region such as eu-west-1.")
	}
	if err := destination.Name(param+".access_key_id", a.AccessKeyID, true); err != nil {
		return err
	}
	if err := destination.Name(param+".secret_access_key", a.SecretAccessKey, true); err != nil {
		return err
	}
	if a.Endpoint != "" {
		if _, err := destination.ServiceURL(param+".endpoint", a.Endpoint, "https://vpce-0123.example.com"); err != nil {
			return err
		}
	}
	return nil
}

// Summarize adds the account to a read's summary, its secret masked.
func (a Account) Summarize(summary map[string]any) {
	summary["region"] = a.Region
	summary["access_key_id"] = a.AccessKeyID
	summary["secret_access_key"] = destination.Masked
	if a.Endpoint != "" {
		summary["endpoint"] = a.Endpoint
	}
}

// Addresses is the endpoint, when one is named: the operator's rules
// for a URL apply to it.
func (a Account) Addresses() []destination.Address {
	if a.Endpoint == "" {
		return nil
	}
	return []destination.Address{{Field: "endpoint", URL: a.Endpoint}}
}

// Plaintext is "endpoint" when it is http://.
func (a Account) Plaintext() string {
	if strings.HasPrefix(strings.ToLower(a.Endpoint), "http://") {
		return "endpoint"
	}
	return ""
}

// Client is what every AWS SDK client's Options take.
type Client struct {
	Region       string
	Credentials  aws.CredentialsProvider
	HTTPClient   *http.Client
	Retryer      aws.Retryer
	BaseEndpoint *string
}

// Client is the SDK options of the account on env: the static key, the
// destination's HTTP client (env's dialer, bounded answers), and no
// retry of the SDK's own: webhookd's schedule is the retry, one request
// per attempt, so that an attempt's record says what that request met.
func (a Account) Client(env destination.Env) Client {
	c := Client{
		Region:      a.Region,
		Credentials: credentials.NewStaticCredentialsProvider(a.AccessKeyID, a.SecretAccessKey, ""),
		HTTPClient:  destination.HTTPClient(env, maxIdleConns),
		Retryer:     aws.NopRetryer{},
	}
	if a.Endpoint != "" {
		c.BaseEndpoint = aws.String(a.Endpoint)
	}
	return c
}

// CloseIdle closes the idle connections of a client's HTTPClient.
func (c Client) CloseIdle() { c.HTTPClient.CloseIdleConnections() }

// authCodes are the error codes with which an AWS service (or AWS's
// front door) refuses who sent the request.
var authCodes = []string{"InvalidClientTokenId", "SignatureDoesNotMatch", "AccessDenied", "AccessDeniedException",
	"UnrecognizedClientException", "InvalidSecurity", "MissingAuthenticationToken", "IncompleteSignature",
	"ExpiredToken", "InvalidAccessKeyId", "KmsAccessDenied", "AuthorizationError", "AuthorizationErrorException",
	// Kinesis answers a wrong secret key so, with HTTP 400.
	"InvalidSignatureException"}

// serviceCode is an error code as services send them (AccessDenied,
// AWS.SimpleQueueService.NonExistentQueue): anything else a custom
// endpoint sends in its place is not shown.
var serviceCode = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._:-]{0,99}$`)

// Classify gives a failed request of service ("SNS") its attempt error
// code and the merchant's words: the credentials refused are
// auth_failed, a service error (its fault) or no answer in time
// not_confirmed (it may have taken the message), any other answer
// broker_refused (no such resource, a message it would not take), no
// answer at all broker_unreachable. The words are the service's status
// and error code, never the error's text.
func Classify(service string, err error) error {
	var known *destination.Failure
	if errors.As(err, &known) {
		return known
	}
	if failtext.Of(err) == failtext.TooLarge {
		return destination.Fail(destination.CodeTooLarge, "", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return destination.Fail(destination.CodeNotConfirmed, "", err)
	}
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var api smithy.APIError
	if !errors.As(err, &api) && status == 0 {
		return destination.Fail(destination.CodeUnreachable, "", err)
	}
	said := service + " answered"
	if status != 0 {
		said += fmt.Sprintf(" HTTP %d", status)
	}
	if api != nil && serviceCode.MatchString(api.ErrorCode()) {
		said += " " + api.ErrorCode()
	}
	switch {
	case api != nil && (slices.Contains(authCodes, api.ErrorCode()) || strings.Contains(api.ErrorCode(), "AccessDenied")),
		status == http.StatusUnauthorized, status == http.StatusForbidden:
		return destination.Fail(destination.CodeAuthFailed, said, err)
	case status >= http.StatusInternalServerError, api != nil && api.ErrorFault() == smithy.FaultServer:
		return destination.Fail(destination.CodeNotConfirmed, said, err)
	}
	return destination.Fail(destination.CodeRefused, said, err)
}
