package admin

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// portalRoutes mounts the merchant portal's static pages at /portal/. They
// need no credential: the pages hold none, and read the session's token
// from the URL's fragment, which browsers never send.
func portalRoutes(r chi.Router, portal http.Handler) {
	r.Get("/portal", http.RedirectHandler("/portal/", http.StatusMovedPermanently).ServeHTTP)
	r.Mount("/portal/", http.StripPrefix("/portal", portal))
}
