package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// requiredLeases is capped like the operations: each id costs queries
// inside the writer. Over the cap the transaction does nothing.
func testTransactionCapsRequiredLeases(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	ops := []broker.Operation{{Type: "push", Items: []broker.PushItem{{Queue: "out", Payload: []byte(`1`), TransactionID: "o1"}}}}
	ids := make([]string, broker.MaxAcks+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("lease-%d", i)
	}
	_, err := s.b.Transaction(s.ctx, ops, ids...)
	if !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("at most %d", broker.MaxAcks)) || !strings.Contains(err.Error(), "requiredLeases") {
		t.Fatalf("err %v, want invalid naming the limit", err)
	}
	if got, _ := s.popTxids("out", "g", 1); got != nil {
		t.Fatalf("pushed over the cap: %v", got)
	}
	// At the cap (empty ids are no requirement) it goes through.
	if _, err := s.b.Transaction(s.ctx, ops, make([]string, broker.MaxAcks)...); err != nil {
		t.Fatalf("at the cap: %v", err)
	}
}
