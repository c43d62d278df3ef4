package destination

import (
	"fmt"

	"github.com/webhookd/webhookd/internal/invalid"
)

// CheckPlaintext refuses, under param, a destination whose connections
// would carry credentials and payloads in clear, unless allowPlaintext
// (WEBHOOKD_ALLOW_HTTP_TARGETS, the switch that lets webhooks go to
// http://). The API applies it when a destination is set, the Pool again
// when a stored one is opened: the operator may have turned it off since.
func CheckPlaintext(param string, cfg Config, allowPlaintext bool) *invalid.Error {
	field := cfg.Plaintext()
	if field == "" || allowPlaintext {
		return nil
	}
	p := param + "." + field
	return invalid.Value(p, CodePlaintext, fmt.Sprintf(
		"%s would send credentials and payloads in clear (amqp://, a broker without tls, http://, a Pub/Sub emulator); "+
			"this server delivers to brokers only over TLS: use amqps://, \"tls\": true, https:// or credentials_json.", p))
}
