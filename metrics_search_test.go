package main

import (
	"strings"
	"testing"
)

// The server on SQLite reports its search file on /metrics (serve wires
// the store's TextIndex into the web server).
func TestTheServerReportsItsSearchFile(t *testing.T) {
	t.Parallel()
	s := startServer(t, Config{AdminToken: "s3cret-token"})
	m := metricText(t, s)
	for _, want := range []string{"\nlazarus_search_file_bytes ", "\nlazarus_search_index_behind 0\n", "\nlazarus_search_index_failing 0\n"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics has no %q", strings.TrimSpace(want))
		}
	}
}
