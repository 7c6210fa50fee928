package web

import (
	"net/http"
	"net/url"
)

// contentSecurityPolicy allows only the server's own scripts, styles and
// connections: no inline script or style (the pages have none, and htmx is
// told not to add its indicator styles), no framing, no foreign forms.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// The values of the security headers, made once: a response's header map
// shares them (net/http copies the map when it writes the header, and a
// Set or Add of the same key replaces or grows the slice, never writes
// into it).
var (
	cspValue         = []string{contentSecurityPolicy}
	nosniffValue     = []string{"nosniff"}
	sameOriginValue  = []string{"same-origin"}
	frameDenialValue = []string{"DENY"}
)

// securityHeaders sets the browser protections on every response, errors
// and unknown routes included.
func securityHeaders(next http.Handler) http.Handler { return securityHeadersWith(next, cspValue) }

// securityHeadersWith is securityHeaders with the Content-Security-Policy
// csp (one value).
func securityHeadersWith(next http.Handler, csp []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Security-Policy"] = csp[:1:1] // canonical keys, as Set would make them
		h["X-Content-Type-Options"] = nosniffValue[:1:1]
		h["Referrer-Policy"] = sameOriginValue[:1:1]
		h["X-Frame-Options"] = frameDenialValue[:1:1]
		next.ServeHTTP(w, r)
	})
}

// originOf is the scheme and host of an absolute URL, as a CSP source
// ("https://idp.example:8443"); "" when raw is not one.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
