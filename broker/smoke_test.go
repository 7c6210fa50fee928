package broker_test

import (
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

func TestSmoke(t *testing.T) {
	s := setup(t)
	s.configure("q", map[string]any{"retryLimit": 1, "retryDelay": 1000})
	s.push("q", "", "a", "b")
	ids, res := s.popTxids("q", "g", 1)
	if len(ids) != 1 || ids[0] != "a" {
		t.Fatalf("got %v", ids)
	}
	s.ack(res.Messages[0], broker.AckFailed, "boom")
	if ids, _ := s.popTxids("q", "g", 1); len(ids) != 0 {
		t.Fatalf("during delay got %v", ids)
	}
	s.clock.Advance(1001 * 1e6)
	ids, res = s.popTxids("q", "g", 1)
	if len(ids) != 1 || ids[0] != "a" || res.Messages[0].RetryCount != 1 {
		t.Fatalf("after delay got %v %+v", ids, res.Messages)
	}
	r := s.ack(res.Messages[0], broker.AckFailed, "boom again")
	if !r.DLQ {
		t.Fatalf("not dlq: %+v", r)
	}
	dl := s.dead("q", "g")
	if len(dl) != 1 || dl[0].Error != "boom again" || dl[0].RetryCount != 1 {
		t.Fatalf("dead %+v", dl)
	}
	ids, _ = s.popTxids("q", "g", 1)
	if len(ids) != 1 || ids[0] != "b" {
		t.Fatalf("next got %v", ids)
	}
}
