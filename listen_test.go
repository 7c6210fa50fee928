package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// serve on a wildcard address logs the URLs it can be reached at (the
// loopback's first, then the interfaces'), never http://[::]:P, each one
// answering; and it warns that the dashboard is on every interface over
// plain HTTP. On a given address it logs that address, and no warning.
func TestServeOnAWildcardLogsReachableURLsAndWarns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr     string
		wildcard bool
	}{{"0.0.0.0:0", true}, {":0", true}, {"127.0.0.1:0", false}} {
		t.Run(c.addr, func(t *testing.T) {
			t.Parallel()
			logs := &syncBuffer{}
			cfg := Config{Addr: c.addr, DBPath: filepath.Join(t.TempDir(), "l.db"), Sync: "NORMAL", AdminPassword: "correct horse battery", bcryptCost: bcrypt.MinCost, LogFormat: "json"}
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			listening := make(chan net.Addr, 1)
			go func() { done <- serve(ctx, cfg, newLogger(cfg, logs), io.Discard, func(a net.Addr) { listening <- a }) }()
			t.Cleanup(func() { stop(); <-done })
			select {
			case <-listening:
			case err := <-done:
				t.Fatalf("serve: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("not listening within 10s")
			}
			var line struct {
				URL  string
				URLs []string
			}
			var warned bool
			for _, l := range strings.Split(logs.String(), "\n") {
				switch {
				case strings.Contains(l, `"msg":"listening"`):
					if err := json.Unmarshal([]byte(l), &line); err != nil {
						t.Fatal(err)
					}
				case strings.Contains(l, "every interface over plain HTTP"):
					warned = true
				}
			}
			if warned != c.wildcard {
				t.Errorf("warned of every interface: %v, want %v", warned, c.wildcard)
			}
			if len(line.URLs) == 0 || line.URL != line.URLs[0] || !strings.HasPrefix(line.URL, "http://127.0.0.1:") {
				t.Fatalf("logged url %q, urls %v: want the loopback's first", line.URL, line.URLs)
			}
			if c.wildcard && len(line.URLs) < 2 {
				t.Errorf("urls %v: want the interfaces' too", line.URLs)
			}
			for _, u := range line.URLs {
				if strings.Contains(u, "[::]") || strings.Contains(u, "0.0.0.0") {
					t.Errorf("url %s is a wildcard, not an address to reach", u)
				}
				resp, err := http.Get(u + "/health")
				if err != nil {
					t.Errorf("%s: %v", u, err)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%s/health: %d", u, resp.StatusCode)
				}
			}
		})
	}
}
