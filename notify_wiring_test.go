package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// serve wires notifications as its flags say: without --public-url the
// links start with the address it listens on, and the start warns; with
// --notify-allow-private a Slack channel on the loopback gets its
// messages; without it, the same channel is refused, and the delivery
// log says why; with --public-url the links start with it.
func TestServeSendsNotificationsAsItsFlagsSay(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var texts []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Text string `json:"text"`
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &m) == nil {
			mu.Lock()
			texts = append(texts, m.Text)
			mu.Unlock()
		}
	}))
	t.Cleanup(receiver.Close)
	received := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), texts...)
	}
	test := func(s *server) {
		t.Helper()
		resp, body := s.do(http.MethodPost, "/api/v1/notify/channels", "", map[string]any{"name": "ops", "kind": "slack", "url": receiver.URL + "/services/x"})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("channel: %d %s", resp.StatusCode, body)
		}
		var ch struct {
			ID int64 `json:"id"`
		}
		json.Unmarshal(body, &ch)
		if resp, body := s.do(http.MethodPost, "/api/v1/notify/channels/"+strings.TrimSpace(string(mustJSON(t, ch.ID)))+"/test", "", nil); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("test: %d %s", resp.StatusCode, body)
		}
	}

	open := startServer(t, Config{AdminToken: "s3cret-token", NotifyAllowPrivate: true})
	if !strings.Contains(open.logs.String(), "no --public-url") || !strings.Contains(open.logs.String(), "--notify-allow-private") {
		t.Fatalf("the start does not warn of the missing --public-url and of --notify-allow-private:\n%s", open.logs)
	}
	test(open)
	eventually(t, 20*time.Second, "the test arrives", func() bool { return len(received()) == 1 })
	if got := received()[0]; !strings.Contains(got, "<"+open.url+"/|Open in Lazarus>") {
		t.Fatalf("the link is not the listen address's: %q", got)
	}

	closed := startServer(t, Config{AdminToken: "s3cret-token", PublicURL: "https://lazarus.example.com"})
	if strings.Contains(closed.logs.String(), "no --public-url") {
		t.Fatalf("warned with --public-url set:\n%s", closed.logs)
	}
	test(closed)
	eventually(t, 20*time.Second, "the refusal in the delivery log", func() bool {
		_, body := closed.do(http.MethodGet, "/api/v1/notify/deliveries", "", nil)
		return strings.Contains(string(body), `"lastError":"`) && strings.Contains(string(body), "refused")
	})
	if n := len(received()); n != 1 {
		t.Fatalf("the receiver got %d messages, want 1: the second server may not reach the loopback", n)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
