package testpki

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
)

// ServeMTLS starts an HTTPS server on 127.0.0.1 that serves h with a
// certificate of serverCA and requires a client certificate of
// clientCA; it closes when t ends. The handshakes it refuses on purpose
// are not logged.
func ServeMTLS(t testing.TB, serverCA, clientCA *CA, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA.Pool(),
		Certificates: []tls.Certificate{serverCA.Server(t).TLS(t)}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}
