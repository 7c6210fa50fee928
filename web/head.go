package web

import (
	"context"
	"net/http"
	"strings"
)

// headAsGet answers a HEAD request as the GET of the same URL would be
// answered, status and headers, without the body: echo routes HEAD only
// where it is registered, and every GET route should answer it (load
// balancers, link checkers and curl -I use it). The router is shown a
// GET; net/http, which still holds the HEAD request, drops the body and
// keeps its Content-Length.
//
// Pops are left out: a pop leases the messages it returns, and a HEAD
// would take messages that nobody sees (echo answers it 405). A handler
// whose GET does real work beyond its answer (an export reads every row
// and writes the audit) asks isHead and answers with the headers alone.
func headAsGet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodHead || strings.HasPrefix(r.URL.Path, apiPrefix+"/pop/") {
			next.ServeHTTP(w, r)
			return
		}
		get := r.WithContext(context.WithValue(r.Context(), headKey{}, true)) // a copy: r stays a HEAD for net/http
		get.Method = http.MethodGet
		next.ServeHTTP(w, get)
	})
}

type headKey struct{}

// isHead reports whether the GET being handled is a HEAD request that
// headAsGet passed on: only the status and headers will reach the client.
func isHead(r *http.Request) bool {
	v, _ := r.Context().Value(headKey{}).(bool)
	return v
}
