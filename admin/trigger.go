package admin

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/webhookd/webhookd/producer"
)

// sandbox is the environment where events may be triggered by hand.
const sandbox = "sandbox"

// errTriggerLive refuses a trigger outside the sandbox: a made-up event
// would reach a merchant's real endpoints as if money had moved.
var errTriggerLive = newError(http.StatusForbidden, catInvalidRequest, "permission_denied",
	"Events can be triggered only in the sandbox environment; this engine serves production.")

// trigger publishes an event of the type named in the path, with the
// catalogue's example payload, to the merchant's own subscriptions (and
// listeners), exactly as a real one: same fan-out, signing and retries.
// It answers 202 with the Event.
func (h eventHandlers) trigger(w http.ResponseWriter, r *http.Request) error {
	if h.environment != sandbox {
		return errTriggerLive
	}
	typ := chi.URLParam(r, "type")
	types := h.types
	if bad := types.CheckTrigger("type", typ); bad != nil {
		return bad
	}
	ev, _, err := h.publisher.Publish(r.Context(), producer.Event{MerchantID: principalOf(r.Context()).Merchant.ID,
		Type: typ, Payload: types.Example(typ)})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, eventView(ev))
	return nil
}
