package admin

import (
	"net/http"
	"slices"

	"github.com/webhookd/webhookd/internal/asyncapi"
	"github.com/webhookd/webhookd/internal/catalogue"
	"github.com/webhookd/webhookd/internal/destination"
)

// buildAsyncAPI is the AsyncAPI document of cfg's catalogue and of the
// destination kinds its subscriptions may use (Destinations, every kind
// when nil).
func buildAsyncAPI(cfg Config) ([]byte, error) {
	var kinds []destination.Metadata
	if cfg.Kinds != nil {
		allowed := allowedDestinations(cfg.Destinations, cfg.Kinds)
		for _, md := range cfg.Kinds.Metadata() {
			if slices.Contains(allowed, md.Type) {
				kinds = append(kinds, md)
			}
		}
	}
	return asyncapi.Build(asyncapi.Config{Types: catalogue.New(cfg.EventTypes).Entries(), Kinds: kinds, APIVersion: cfg.Versions.Latest()})
}

// asyncAPI serves GET /v1/asyncapi.json publicly, like the OpenAPI
// document: it describes the deployment's catalogue, which the
// documentation shows anyway, and generators should not need a key.
func (h documentHandlers) asyncAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(h.asyncAPIDocument)
}
