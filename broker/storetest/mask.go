package storetest

import (
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A queue's masks (maskPaths, maskRevealRole) are kept by the store, read
// back as Broker.Masks reads them, and a null puts them back to none and
// admin.
func testQueueMasksAreKept(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("orders", map[string]any{"maskPaths": []string{"$.card.number", "$..email"}, "maskRevealRole": "operator"})
	s.configure("plain", map[string]any{"retryLimit": 1})
	ms, err := s.b.Masks(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	qm, ok := ms["orders"]
	if len(ms) != 1 || !ok || len(qm.Paths) != 2 || qm.Paths[1] != "$..email" || qm.RevealRole != broker.RoleOperator {
		t.Fatalf("masks %+v", ms)
	}
	if got := string(ms.Payload("orders", []byte(`{"card":{"number":"4111"},"u":{"email":"a@b"}}`))); got != `{"card":{"number":"•••"},"u":{"email":"•••"}}` {
		t.Fatalf("masked %s", got)
	}
	q, err := s.b.Queue(s.ctx, "plain")
	if err != nil || q.Options.MaskPaths != "" || q.Options.RevealRole() != broker.RoleAdmin {
		t.Fatalf("plain: %+v %v", q.Options, err)
	}
	s.configure("orders", map[string]any{"maskPaths": nil, "maskRevealRole": nil})
	if ms, err = s.b.Masks(s.ctx); err != nil || len(ms) != 0 {
		t.Fatalf("masks after null: %+v %v", ms, err)
	}
}
