package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The queue page says in words when a replay job of the queue pauses
// itself (the queue options replayPausePercent and replayPauseWindow).
func TestQueuePageSaysWhenReplayJobsPause(t *testing.T) {
	t.Parallel()
	s := setup(t)
	seed(t, s)
	b, _ := s.loggedIn(broker.RoleViewer)
	text := b.get("/queues/orders").want(http.StatusOK).doc().Text()
	if !strings.Contains(text, "pauses itself when more than 20 % of the last 50 copies settled fail again") {
		t.Fatalf("the default rule is not on the page:\n%s", text)
	}
	if _, err := s.broker.Configure(s.ctx, "orders", map[string]json.RawMessage{"replayPausePercent": json.RawMessage(`0`)}, "test"); err != nil {
		t.Fatal(err)
	}
	if text := b.get("/queues/orders").want(http.StatusOK).doc().Text(); !strings.Contains(text, "a replay job never pauses itself") {
		t.Fatalf("replayPausePercent 0 is not said:\n%s", text)
	}
}
