package web_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A payload whose words would make a tsvector past PostgreSQL's 1 MiB
// (150,000 distinct integers: 1.09 MB, within the push limit) is still
// dead-lettered on the first failure: the index holds the first part of
// its words, and the dead letter's API answer and page say so. SQLite's
// index holds every word: neither says anything there.
func TestHugePayloadIsDeadLetteredIndexedInPart(t *testing.T) {
	t.Parallel()
	s := setup(t)
	nums := make([]string, 150_000)
	for i := range nums {
		nums[i] = strconv.Itoa(1_000_000 + i)
	}
	payload := "[" + strings.Join(nums, ",") + "]"
	d := s.fail("huge", "", "billing", "huge-1", payload, "too big to handle")

	var got struct {
		ID            string `json:"id"`
		IndexedInPart bool   `json:"indexedInPart"`
	}
	s.call("GET", "/api/v1/dlq/"+d.ID, "").want(http.StatusOK).decode(&got)
	pg := os.Getenv("LAZARUS_TEST_STORE") == "postgres"
	if got.IndexedInPart != pg {
		t.Fatalf("indexedInPart %v, want %v (PostgreSQL only)", got.IndexedInPart, pg)
	}
	b, _ := s.loggedIn(broker.RoleViewer)
	page := b.get("/queues/huge/dead-letters/" + d.ID).want(http.StatusOK)
	if note := page.testid("indexed-in-part"); (note != "") != pg || (pg && !strings.Contains(note, "indexed in part")) {
		t.Fatalf("page note %q, want one on PostgreSQL only", note)
	}
	// The first words are found; on SQLite the last too.
	for _, w := range []string{nums[0], nums[len(nums)-1]} {
		l := s.deadLetters("q=" + w)
		want := 1
		if w == nums[len(nums)-1] && pg {
			want = 0
		}
		if len(l.Messages) != want {
			t.Errorf("search %s: %d found, want %d", w, len(l.Messages), want)
		}
	}
	// A small payload says nothing.
	small := s.fail("huge", "", "billing", "small-1", `{"a":1}`, "no")
	var sm map[string]json.RawMessage
	s.call("GET", "/api/v1/dlq/"+small.ID, "").want(http.StatusOK).decode(&sm)
	if _, ok := sm["indexedInPart"]; ok {
		t.Fatalf("a small payload's answer says indexedInPart: %s", sm["indexedInPart"])
	}
}
