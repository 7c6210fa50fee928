package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestMaxPayloadBytesSetting(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("serve", nil, envOf(map[string]string{"LAZARUS_MAX_PAYLOAD_BYTES": "4096"}), io.Discard)
	if err != nil || cfg.MaxPayloadBytes != 4096 {
		t.Fatalf("MaxPayloadBytes %d, err %v", cfg.MaxPayloadBytes, err)
	}
	if cfg, _ := parseConfig("serve", nil, envOf(nil), io.Discard); cfg.MaxPayloadBytes != 0 {
		t.Fatalf("unset: MaxPayloadBytes %d, want 0 (web's default)", cfg.MaxPayloadBytes)
	}
	// Over the body's cap, a push of one such payload could never arrive.
	for _, bad := range []string{"0", "-1", "1MB", "8388609"} {
		_, err := parseConfig("serve", nil, envOf(map[string]string{"LAZARUS_MAX_PAYLOAD_BYTES": bad}), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "LAZARUS_MAX_PAYLOAD_BYTES must be a whole number of bytes from 1 to 8388608") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func TestServeRefusesAPayloadOverTheLimit(t *testing.T) {
	t.Parallel()
	s := startServer(t, Config{AdminToken: "s3cret-token", MaxPayloadBytes: 1000})
	small := `"` + strings.Repeat("s", 998) + `"` // 1000 bytes: at the limit
	big := `"` + strings.Repeat("b", 999) + `"`   // 1001 bytes
	items := []map[string]any{
		{"queue": "q", "payload": json.RawMessage(small)},
		{"queue": "q", "payload": json.RawMessage(big)},
	}
	resp, body := s.do("POST", "/api/v1/push", "", map[string]any{"items": items})
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), `items[1]: payload is 1001 bytes, over the limit of 1000 bytes`) {
		t.Fatalf("push: %d %s", resp.StatusCode, body)
	}
	// Nothing of the push was stored.
	if resp, body := s.do("GET", "/api/v1/resources/queues/q", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("queue after the refused push: %d %s", resp.StatusCode, body)
	}
	if resp, body := s.do("POST", "/api/v1/push", "", map[string]any{"items": items[:1]}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("push at the limit: %d %s", resp.StatusCode, body)
	}
}

// A client that sends its request slowly (slowloris) is cut off by the
// server's read timeouts, and does not hold the server up for others.
func TestServeCutsOffSlowClients(t *testing.T) {
	t.Parallel()
	cfg := Config{AdminToken: "s3cret-token"}
	cfg.readHeaderTimeout, cfg.readTimeout = 300*time.Millisecond, time.Second
	s := startServer(t, cfg)
	addr := strings.TrimPrefix(s.url, "http://")

	t.Run("Headers", func(t *testing.T) {
		start := time.Now() // before the server can start its clock
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		closed := make(chan error, 1)
		go func() {
			_, err := conn.Read(make([]byte, 1))
			closed <- err
		}()
		if _, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: lazarus\r\n"); err != nil {
			t.Fatal(err)
		}
		// One header line every 100 ms: the headers never end.
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case err := <-closed:
				// Not before the header timeout; the loop below fails
				// if it is not cut off at all.
				if d := time.Since(start); d < 300*time.Millisecond {
					t.Fatalf("closed after %v (%v), want the 300 ms header timeout", d, err)
				}
				return
			case <-tick.C:
				if i == 50 {
					t.Fatal("the server still reads headers after 5 s")
				}
				// Others are served meanwhile.
				if i == 1 {
					if resp, _ := s.do("GET", "/health", "-", nil); resp.StatusCode != http.StatusOK {
						t.Errorf("health while a client is slow: %d", resp.StatusCode)
					}
				}
				_, _ = fmt.Fprintf(conn, "X-Slow-%d: 1\r\n", i)
			}
		}
	})

	t.Run("Body", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		body := `{"items":[{"queue":"slow","payload":1}]}`
		start := time.Now()
		_, err = fmt.Fprintf(conn, "POST /api/v1/push HTTP/1.1\r\nHost: lazarus\r\nAuthorization: Bearer s3cret-token\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
		if err != nil {
			t.Fatal(err)
		}
		// The body, one byte every 200 ms: it would take 8 s.
		go func() {
			for i := range len(body) {
				if _, err := io.WriteString(conn, body[i:i+1]); err != nil {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to the slow body: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		// The body would take 8 s to arrive: a 408 says it was cut off.
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), `"error":"the request body did not arrive in time"`) {
			t.Fatalf("after %v: %d %s", time.Since(start), resp.StatusCode, b)
		}
		if resp, body := s.do("GET", "/api/v1/resources/queues/slow", "", nil); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("the slow push was stored: %d %s", resp.StatusCode, body)
		}
	})
}
