package admin

import (
	"net/http"
)

// sendTestEvent stores a ping.test event for one subscription and answers
// 202 with its delivery.
func (h deliveryHandlers) sendTestEvent(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	d, err := h.actions.SendTestEvent(r.Context(), principalOf(r.Context()).Merchant.ID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, deliveryView(d))
	return nil
}
