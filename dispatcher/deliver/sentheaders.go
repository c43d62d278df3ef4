package deliver

import (
	"net/http"
	"strings"

	"github.com/webhookd/webhookd/internal/subscriptions"
)

// sentHeaders is what an attempt records of its request's headers, for the
// delivery log: every header as sent (values of one name joined with ", "),
// except that credentials are masked as subscription reads mask them: the
// subscription's own headers (custom, sealed at rest because they may hold
// an API key) and any Authorization. The signature is shown: it is no
// secret, and it is what a merchant debugging verification needs to see.
func sentHeaders(h http.Header, custom map[string]string) map[string]string {
	masked := map[string]bool{"Authorization": true, "Proxy-Authorization": true}
	for name := range custom {
		masked[http.CanonicalHeaderKey(name)] = true
	}
	out := make(map[string]string, len(h))
	for name, values := range h {
		v := strings.Join(values, ", ")
		if masked[name] {
			v = subscriptions.MaskedValue(v)
		}
		out[name] = v
	}
	return out
}
