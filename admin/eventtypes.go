package admin

import (
	"net/http"

	"github.com/webhookd/webhookd/internal/catalogue"
)

// listTypes answers GET /v1/event_types: the types a subscription may
// name, with what each means and an example payload, for the portal's
// event picker and for merchants writing handlers. It answers the whole
// catalogue in one page, in the list envelope: it is small and fixed by
// the configuration, so has_more is always false and next_cursor null. It takes no parameter and ignores
// any it is given (limit included): every answer is the whole catalogue.
func (h eventHandlers) listTypes(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, list[catalogue.EventType]{Data: h.types.Entries()})
	return nil
}
