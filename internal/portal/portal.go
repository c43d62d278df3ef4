// Package portal serves the merchant portal: a single-page web application,
// embedded in the binary, that talks only to the public /v1 API with the
// Bearer token it finds in its URL's fragment. It holds no credential and
// no state of its own: every page is a static asset.
package portal

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// assets are the portal's files: HTML, CSS and JavaScript modules, served
// as they are (no build step).
//
//go:embed assets
var assets embed.FS

// Config is what the portal needs from the process configuration.
type Config struct {
	// FrameAncestors are the origins allowed to show the portal in a frame
	// (Content-Security-Policy frame-ancestors); none forbids framing.
	// Check them with ParseFrameAncestors.
	FrameAncestors []string
}

// Handler serves the portal's assets under the prefix it is mounted at,
// each with the portal's security headers.
type Handler struct {
	files  http.Handler
	policy string
}

// New builds the portal's handler. Mount it so that it sees paths relative
// to its prefix, e.g. http.StripPrefix("/portal", h).
func New(cfg Config) *Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		// The directory is embedded at build time: a missing one is a
		// broken build, not a runtime condition.
		panic("portal: embedded assets missing: " + err.Error())
	}
	return &Handler{files: http.FileServerFS(sub), policy: contentSecurityPolicy(cfg.FrameAncestors)}
}

// contentSecurityPolicy allows only the portal's own scripts, styles and
// API calls; images may also come from https: so that a merchant's logo
// shows. No inline script or style is allowed: the accent colour is set
// from JavaScript through the CSSOM, which the policy does not restrict.
func contentSecurityPolicy(frameAncestors []string) string {
	ancestors := "'none'"
	if len(frameAncestors) > 0 {
		ancestors = strings.Join(frameAncestors, " ")
	}
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' https:; " +
		"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; " +
		"frame-ancestors " + ancestors
}

// ServeHTTP serves one asset. Only GET and HEAD are answered; the file
// server answers a directory with its index.html.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", h.policy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	// The portal is small and changes with the binary: always revalidate,
	// so that an upgraded engine never runs an old module beside a new one.
	hdr.Set("Cache-Control", "no-cache")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h.files.ServeHTTP(w, r)
}
