package storetest

import (
	"errors"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// An id that a store cannot keep as text (a NUL, bytes that are not
// UTF-8) is refused on every store, and nothing of the push is kept.
func testPushRefusesIdsThatAreNotText(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	for _, it := range []broker.PushItem{
		{TransactionID: "order\x00-1"},
		{TransactionID: "order-\xff"},
		{TransactionID: "ok", TraceID: "trace\x00"},
		{TransactionID: "ok", TraceID: "\xc3("},
	} {
		it.Queue, it.Payload = "q", []byte(`{}`)
		good := broker.PushItem{Queue: "q", Payload: []byte(`{}`), TransactionID: "fine"}
		if _, err := s.b.Push(s.ctx, []broker.PushItem{good, it}); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("push of %q / %q: %v, want ErrInvalid", it.TransactionID, it.TraceID, err)
		}
	}
	if res, err := s.b.Push(s.ctx, []broker.PushItem{{Queue: "q", Payload: []byte(`{}`), TransactionID: "fine"}}); err != nil || res[0].Status != broker.StatusQueued {
		t.Fatalf("after the refusals, a push of the good item: %+v %v, want it queued (nothing kept before)", res, err)
	}
}
