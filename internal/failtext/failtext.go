// Package failtext tells a merchant why webhookd could not reach one of
// their addresses (a receiver, a broker, a token endpoint) in words
// written for them: the kind of failure, never the error's own text. The
// text of an error from the network stack, the operating system or a
// cloud SDK names what the merchant must not see: this server's
// addresses, its DNS server, its egress proxy, its files. The raw error is
// for the operator's log alone.
package failtext

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"code.dny.dev/ssrf"
)

// Kind is a kind of failure to reach an address.
type Kind int

// The kinds, from the most to the least specific.
const (
	// Unknown is a failure of no kind below: its text is not shown.
	Unknown Kind = iota
	// Blocked is an address the deliveries' address check refused.
	Blocked
	// TooLarge is an answer larger than the bound on what is read.
	TooLarge
	// Timeout is no answer in time.
	Timeout
	// NameNotFound is a host name DNS says does not exist.
	NameNotFound
	// DNS is a host name that could not be resolved for another reason.
	DNS
	// Refused is a connection refused.
	Refused
	// Closed is a connection reset or closed by the other side.
	Closed
	// Unreachable is a host or network that cannot be reached.
	Unreachable
	// HandshakeRefused is a TLS handshake the server refused (an alert).
	HandshakeRefused
	// Untrusted is a server certificate from an authority not trusted.
	Untrusted
	// WrongHost is a server certificate that does not name the host.
	WrongHost
	// InvalidCertificate is a server certificate not valid (expired, not
	// yet valid, not for a server).
	InvalidCertificate
	// TLS is a TLS failure of another kind.
	TLS
)

// messages are the kinds' words.
var messages = [...]string{
	Unknown:            "",
	Blocked:            "the address is not one deliveries may reach",
	TooLarge:           "the answer was larger than this server reads",
	Timeout:            "timed out",
	NameNotFound:       "host name not found (DNS)",
	DNS:                "host name could not be resolved (DNS)",
	Refused:            "connection refused",
	Closed:             "connection closed by the other side",
	Unreachable:        "host unreachable",
	HandshakeRefused:   "the server refused the TLS handshake",
	Untrusted:          "TLS failed: the server's certificate is not from a trusted authority",
	WrongHost:          "TLS failed: the server's certificate does not name its host",
	InvalidCertificate: "TLS failed: the server's certificate is not valid (expired, not yet valid, or not for a server)",
	TLS:                "TLS failed",
}

// String is the kind in the merchant's words; "" for Unknown.
func (k Kind) String() string {
	if k < 0 || int(k) >= len(messages) {
		return ""
	}
	return messages[k]
}

// TooLargeError is an answer that went past the bound on what is read of
// it: reading stops there.
type TooLargeError struct {
	// Limit is the bound, in bytes.
	Limit int64
}

// Error implements error.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the answer was larger than %d bytes", e.Limit)
}

// Of is the kind of err, by its types and the errors it wraps: a context
// deadline or a network timeout is Timeout whatever else it says.
func Of(err error) Kind {
	var dnsErr *net.DNSError
	var netErr net.Error
	var tooLarge *TooLargeError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var alert tls.AlertError
	switch {
	case err == nil:
		return Unknown
	case errors.Is(err, ssrf.ErrProhibitedIP), errors.Is(err, ssrf.ErrProhibitedPort),
		errors.Is(err, ssrf.ErrProhibitedNetwork), errors.Is(err, ssrf.ErrInvalidHostPort):
		return Blocked
	case errors.As(err, &tooLarge):
		return TooLarge
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return Timeout
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return NameNotFound
		}
		return DNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case refusedHandshake(err):
		return HandshakeRefused
	case errors.As(err, &unknownAuth):
		return Untrusted
	case errors.As(err, &hostErr):
		return WrongHost
	case errors.As(err, &invalid):
		return InvalidCertificate
	case errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &alert), strings.Contains(err.Error(), "tls: "):
		return TLS
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return Closed
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return Unreachable
	}
	return Unknown
}

// refusedHandshake tells an endpoint that refused the TLS handshake: it
// sent an alert (crypto/tls reports it as a "remote error"), for a client
// certificate missing or not trusted, say. With TLS 1.3 the server checks
// the client's certificate after the client finished its side, so the
// alert arrives when the answer is read; the transport may then wrap it
// without keeping its type, hence the text.
func refusedHandshake(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return true
	}
	return strings.Contains(err.Error(), "remote error: tls: ")
}

// Told is a failure described in webhookd's own words for the merchant:
// its text is shown as it is, so it names nothing but what the merchant
// configured (an exchange, a queue, a limit) and what their server
// answered.
type Told string

// Error implements error.
func (t Told) Error() string { return string(t) }

// Tell is Told of a formatted text.
func Tell(format string, args ...any) error { return Told(fmt.Sprintf(format, args...)) }

// Describe is err in the merchant's words: the outermost Told in its
// chain, else its Kind's words; "" when it is of no kind known, for the
// caller to say what failed in its own terms.
func Describe(err error) string {
	var t Told
	if errors.As(err, &t) {
		return string(t)
	}
	return Of(err).String()
}
