package server

import (
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"
)

// guard refuses what a browser would send on behalf of another site before
// any handler runs. The API listens on loopback with no authentication, so
// a page on any origin can reach it; these checks are what keep that page
// from loading models, unloading them or making the server read headers:
//
//   - Host must name this server's loopback address and port: a page whose
//     name was rebound to 127.0.0.1 (DNS rebinding) still sends its own name.
//   - Origin, when present, must be this server's: browsers send it on every
//     cross-origin POST and on CORS fetches.
//   - Sec-Fetch-Site, when present, must not be cross-site or same-site:
//     browsers send it even where they send no Origin (an image, a plain
//     GET link), and they send it to http://127.0.0.1 and localhost.
//   - A request that changes state must be application/json (route checks
//     it, after the method), which no form and no no-cors fetch can send
//     without a CORS preflight, and the preflight is never answered.
//
// With a token (a server listening beyond loopback), any Host is accepted
// but every API request must carry the token; the panel's files need none,
// since they hold no data.
func (s *server) guard(next http.Handler) http.Handler {
	return handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		api := strings.HasPrefix(r.URL.Path, "/api/") || strings.HasPrefix(r.URL.Path, "/v1/")
		if s.cfg.Token == "" {
			if err := checkHost(r); err != nil {
				return err
			}
		} else if api {
			if err := checkToken(r, s.cfg.Token); err != nil {
				return err
			}
		}
		if err := checkOrigin(r, api); err != nil {
			return err
		}
		next.ServeHTTP(w, r)
		return nil
	})
}

func forbidden(format string, args ...any) error {
	return &apiError{status: http.StatusForbidden, msg: fmt.Sprintf(format, args...)}
}

// isLoopbackName reports whether host is a name a loopback server answers
// to. Any other name reaching it was resolved to loopback by someone else.
func isLoopbackName(host string) bool {
	switch strings.ToLower(host) {
	case "127.0.0.1", "localhost", "::1":
		return true
	}
	return false
}

// checkHost accepts a Host naming a loopback address with the port the
// request arrived on (when the connection is known: a handler called
// directly, as in tests, has none).
func checkHost(r *http.Request) error {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		// A Host without a port would mean port 80; the server is never
		// there in practice, and a name without a port is what a
		// rebinding page on port 80 sends.
		return forbidden("Host %q: expected 127.0.0.1, localhost or [::1] with this server's port", r.Host)
	}
	if !isLoopbackName(host) {
		return forbidden("Host %q: expected 127.0.0.1, localhost or [::1] with this server's port; this server answers only on loopback, and a page whose name was rebound to it is refused", r.Host)
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, lport, err := net.SplitHostPort(la.String()); err == nil && lport != port {
			return forbidden("Host %q: expected port %s, the one this server listens on", r.Host, lport)
		}
	}
	return nil
}

// checkOrigin refuses a foreign Origin and a cross-site fetch. The panel's
// own fetches are same-origin; a navigation typed by a person says
// Sec-Fetch-Site none. Only the panel's files may be navigated to from
// another site (a link to the panel), never the API.
func checkOrigin(r *http.Request, api bool) error {
	if o := r.Header.Get("Origin"); o != "" {
		if o != "http://"+r.Host && o != "https://"+r.Host {
			return forbidden("Origin %q: expected this server's own (http://%s); requests from other sites are refused", o, r.Host)
		}
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		if api || r.Header.Get("Sec-Fetch-Mode") != "navigate" {
			return forbidden("Sec-Fetch-Site %q: expected same-origin; requests from other sites are refused", site)
		}
	}
	return nil
}

// checkJSON requires application/json on a request that changes state.
func checkJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return &apiError{status: http.StatusUnsupportedMediaType, msg: "no Content-Type: expected application/json on every request that changes state"}
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return &apiError{status: http.StatusUnsupportedMediaType, msg: fmt.Sprintf("Content-Type %q: expected application/json", ct)}
	}
	return nil
}

// checkToken requires "Authorization: Bearer TOKEN", compared in constant
// time so its answer times say nothing about the token.
func checkToken(r *http.Request, token string) error {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
		return &apiError{status: http.StatusUnauthorized, msg: "this server listens beyond loopback and wants its token: Authorization: Bearer TOKEN (printed when it started)"}
	}
	return nil
}
