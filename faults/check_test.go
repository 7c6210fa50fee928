package faults

import (
	"strings"
	"testing"
	"time"
)

// The checker must be able to fail: each doctored history below breaks
// one guarantee, and the checker must name it; the honest history they
// start from must pass.

var t0 = time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// honest is a small history that keeps every guarantee: two messages
// pushed to one partition, each delivered to both groups in order and
// completed; the second is dead-lettered by g2 and replayed once (a
// copy delivered), a hold of g1 during which a pop gets nothing.
func honest() ([]*Op, CheckConfig) {
	ops := []*Op{
		{ID: 1, Client: "prod", Kind: OpPush, Queue: "q", Partition: "p", TransactionID: "q-p-0", Seq: 0, MessageID: "m0", Status: 201, Start: at(0), End: at(10)},
		{ID: 2, Client: "prod", Kind: OpPush, Queue: "q", Partition: "p", TransactionID: "q-p-1", Seq: 1, MessageID: "m1", Status: 201, Start: at(20), End: at(30)},
		{ID: 3, Client: "w1", Kind: OpPop, Queue: "q", Group: "g1", Status: 200, Start: at(40), End: at(50),
			Deliveries: []Delivery{{TransactionID: "q-p-0", MessageID: "m0", Partition: "p", LeaseID: "L1"}, {TransactionID: "q-p-1", MessageID: "m1", Partition: "p", LeaseID: "L1"}}},
		{ID: 4, Client: "w1", Kind: OpAck, Queue: "q", Group: "g1", Status: 200, Start: at(60), End: at(70),
			Acks: []AckItem{{TransactionID: "q-p-0", Partition: "p", LeaseID: "L1", Status: "completed", Success: true}, {TransactionID: "q-p-1", Partition: "p", LeaseID: "L1", Status: "completed", Success: true}}},
		{ID: 5, Client: "w2", Kind: OpPop, Queue: "q", Group: "g2", Status: 200, Start: at(40), End: at(55),
			Deliveries: []Delivery{{TransactionID: "q-p-0", MessageID: "m0", Partition: "p", LeaseID: "L2"}}},
		{ID: 6, Client: "w2", Kind: OpAck, Queue: "q", Group: "g2", Status: 200, Start: at(60), End: at(70),
			Acks: []AckItem{{TransactionID: "q-p-0", Partition: "p", LeaseID: "L2", Status: "completed", Success: true}}},
		{ID: 7, Client: "w2", Kind: OpPop, Queue: "q", Group: "g2", Status: 200, Start: at(80), End: at(90),
			Deliveries: []Delivery{{TransactionID: "q-p-1", MessageID: "m1", Partition: "p", LeaseID: "L3"}}},
		{ID: 8, Client: "w2", Kind: OpAck, Queue: "q", Group: "g2", Status: 200, Start: at(100), End: at(110),
			Acks: []AckItem{{TransactionID: "q-p-1", Partition: "p", LeaseID: "L3", Status: "dlq", Success: true}}},
		{ID: 9, Client: "op", Kind: OpReplay, Queue: "q", Group: "g2", DLQID: "m1", Status: 200, Result: "moved", Start: at(200), End: at(210)},
		{ID: 10, Client: "op", Kind: OpReplay, Queue: "q", Group: "g2", DLQID: "m1", Status: 404, Result: "gone", Start: at(220), End: at(230)},
		{ID: 11, Client: "w1", Kind: OpPop, Queue: "q", Group: "g1", Status: 200, Start: at(300), End: at(310),
			Deliveries: []Delivery{{TransactionID: "dlq:m1", MessageID: "c1", Partition: "p", LeaseID: "L4"}}},
		{ID: 12, Client: "w1", Kind: OpAck, Queue: "q", Group: "g1", Status: 200, Start: at(320), End: at(330),
			Acks: []AckItem{{TransactionID: "dlq:m1", Partition: "p", LeaseID: "L4", Status: "completed", Success: true}}},
		{ID: 13, Client: "op", Kind: OpHold, Queue: "q", Group: "g1", HoldID: "1", Status: 201, Start: at(400), End: at(410)},
		{ID: 14, Client: "w1", Kind: OpPop, Queue: "q", Group: "g1", Status: 204, Start: at(420), End: at(1420)},
		{ID: 15, Client: "op", Kind: OpRelease, Queue: "q", Group: "g1", HoldID: "1", Status: 200, Start: at(2000), End: at(2010)},
		{ID: 16, Client: "op", Kind: OpJob, Comment: "replay", Queue: "q", Group: "g2", DLQIDs: []string{"m1"}, Status: 200, Result: "done", Gone: 1, Skipped: 1, Start: at(2100), End: at(2200)},
		{ID: 17, Client: "op", Kind: OpJob, Comment: "delete", Queue: "q", Group: "g2", DLQIDs: []string{"m1"}, Status: 200, Result: "done", Skipped: 1, Start: at(2300), End: at(2400)},
	}
	cfg := CheckConfig{
		Groups:    map[string][]string{"q": {"g1", "g2"}},
		LeaseTime: 2 * time.Second,
		FinalDLQ:  map[string]map[string]map[string]string{"q": {"g1": {}, "g2": {}}},
	}
	return ops, cfg
}

func find(ops []*Op, id int) *Op {
	for _, o := range ops {
		if o.ID == id {
			return o
		}
	}
	panic("no op")
}

func TestCheckerPassesAnHonestHistory(t *testing.T) {
	ops, cfg := honest()
	// Fate decides what a dead letter may be of: q-p-1 must be one of g2's.
	if f := Fate("q-p-1", "g2", cfg.Groups["q"]); f == "completed" {
		t.Logf("q-p-1's fate in g2 is %s: the final dead letters stay empty in this history", f)
	}
	if r := Check(ops, nil, cfg); len(r.Anomalies) != 0 {
		t.Fatalf("an honest history: %s", r.Summary())
	}
}

func TestCheckerFindsWhatWasDoctored(t *testing.T) {
	cases := []struct {
		name   string
		doctor func(ops []*Op, cfg *CheckConfig) []*Op
		want   string
	}{
		{"a lost push", func(ops []*Op, _ *CheckConfig) []*Op {
			return append(ops, &Op{ID: 100, Client: "prod", Kind: OpPush, Queue: "q", Partition: "p", TransactionID: "q-p-2", Seq: 2, MessageID: "m2", Status: 201, Start: at(35), End: at(38)})
		}, "lost: q-p-2"},
		{"a push answered 201 twice as two messages", func(ops []*Op, _ *CheckConfig) []*Op {
			return append(ops, &Op{ID: 100, Client: "prod", Kind: OpPush, Queue: "q", Partition: "p", TransactionID: "q-p-1", Seq: 1, MessageID: "m1-again", Status: 201, Start: at(31), End: at(33)})
		}, "doubled"},
		{"an order swap", func(ops []*Op, _ *CheckConfig) []*Op {
			d := find(ops, 3).Deliveries
			d[0], d[1] = d[1], d[0]
			return ops
		}, "order: q/p group g1 got q-p-0"},
		{"an overlapping lease", func(ops []*Op, _ *CheckConfig) []*Op {
			// Another worker of g1 gets m0 under another lease while L1 is
			// live (its pop 10 ms after L1's, no ack yet).
			return append(ops, &Op{ID: 100, Client: "w3", Kind: OpPop, Queue: "q", Group: "g1", Status: 200, Start: at(45), End: at(52),
				Deliveries: []Delivery{{TransactionID: "q-p-0", MessageID: "m0", Partition: "p", LeaseID: "L9"}}})
		}, "lease overlap"},
		{"a stale lease's ack that succeeded", func(ops []*Op, _ *CheckConfig) []*Op {
			// L2 ran out, L8 took m0, and then an ack with L2 succeeded.
			a := find(ops, 6)
			a.Start, a.End = at(5000), at(5010)
			return append(ops, &Op{ID: 100, Client: "w3", Kind: OpPop, Queue: "q", Group: "g2", Status: 200, Start: at(4000), End: at(4010),
				Deliveries: []Delivery{{TransactionID: "q-p-0", MessageID: "m0", Partition: "p", LeaseID: "L8"}}})
		}, "lease model: q/g2 message m0"},
		{"a dead letter replayed twice", func(ops []*Op, _ *CheckConfig) []*Op {
			r := find(ops, 10)
			r.Status, r.Result = 200, "moved"
			return ops
		}, "not linearizable"},
		{"a replay answered moved with no copy", func(ops []*Op, _ *CheckConfig) []*Op {
			out := ops[:0]
			for _, o := range ops {
				if o.ID != 11 && o.ID != 12 {
					out = append(out, o)
				}
			}
			return out
		}, "0 copies delivered"},
		{"a job whose counts do not add up", func(ops []*Op, _ *CheckConfig) []*Op {
			j := find(ops, 16)
			j.Gone, j.Moved = 1, 1
			return ops
		}, "job"},
		{"a delete job whose counts do not add up", func(ops []*Op, _ *CheckConfig) []*Op {
			find(ops, 17).Done = 1
			return ops
		}, "delete job"},
		{"a hold that did not hold", func(ops []*Op, _ *CheckConfig) []*Op {
			return append(ops, &Op{ID: 100, Client: "w3", Kind: OpPop, Queue: "q", Group: "g1", Status: 200, Start: at(500), End: at(600),
				Deliveries: []Delivery{{TransactionID: "dlq:m1", MessageID: "c1", Partition: "p", LeaseID: "L7"}}})
		}, "hold: op 100"},
		{"a dead letter lost", func(ops []*Op, cfg *CheckConfig) []*Op {
			// Filed by an ack, never replayed nor deleted, not there at the end.
			find(ops, 9).DLQID, find(ops, 10).DLQID = "other", "other"
			find(ops, 16).DLQIDs, find(ops, 17).DLQIDs = []string{"other"}, []string{"other"}
			return ops
		}, "dead letter lost: q-p-1"},
		{"a circuit breaker that never held", func(ops []*Op, cfg *CheckConfig) []*Op {
			cfg.Groups[BreakerQueue] = []string{"cb"}
			ack := &Op{ID: 100, Client: "b", Kind: OpAck, Queue: BreakerQueue, Group: "cb", Status: 200, Start: at(3000), End: at(3010)}
			for i := range breakerAfter + 1 {
				ack.Acks = append(ack.Acks, AckItem{TransactionID: "x", LeaseID: string(rune('a' + i)), Status: "failed", Success: true})
			}
			return append(ops, ack, &Op{ID: 101, Client: "b", Kind: OpBreaker, Queue: BreakerQueue, Group: "cb", Status: 200, Result: "free", Start: at(3100), End: at(3110)})
		}, "breaker: 4 failures"},
		{"a 500", func(ops []*Op, _ *CheckConfig) []*Op {
			find(ops, 2).Status = 500
			return ops
		}, "answered 500"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops, cfg := honest()
			ops = c.doctor(ops, &cfg)
			r := Check(ops, nil, cfg)
			for _, a := range r.Anomalies {
				if strings.Contains(a, c.want) {
					return
				}
			}
			t.Fatalf("want an anomaly with %q, got: %s", c.want, r.Summary())
		})
	}
}

// A pause that held a healthy process's write longer than the bound is
// an anomaly when a bound is set, and measured either way.
func TestCheckerMeasuresWritesDuringAPause(t *testing.T) {
	ops := []*Op{
		{ID: 1, Client: "prod", Proc: "P2", Kind: OpPush, Queue: "q", Partition: "p", TransactionID: "q-p-0", MessageID: "m0", Status: 201, Start: at(1000), End: at(9000)},
		{ID: 3, Client: "probe", Proc: "P3", Kind: OpPush, Queue: "probe", Partition: "p", TransactionID: "probe-p-0", MessageID: "x0", Status: 201, Start: at(490), End: at(8000)},            // sent just before the pause, held through it
		{ID: 4, Client: "probe", Proc: "P3", Kind: OpPush, Queue: "probe", Partition: "p", TransactionID: "probe-p-1", Seq: 1, MessageID: "x1", Status: 201, Start: at(11000), End: at(20000)}, // after it: not counted
		{ID: 2, Client: "prod", Proc: "P1", Kind: OpPush, Queue: "q", Partition: "p", TransactionID: "q-p-1", Seq: 1, Status: 0, Start: at(1000), End: at(16000)},                              // to the paused one: not counted
	}
	faults := []Fault{{Kind: "pause", Proc: "P1", Start: at(500), End: at(10500)}}
	cfg := CheckConfig{Groups: map[string][]string{"q": {}}, LeaseTime: 2 * time.Second}
	r := Check(ops, faults, cfg)
	if len(r.PauseWaits) != 1 || r.PauseWaits[0].Op != "op 1 push on P2: 201 after 8s" {
		t.Fatalf("the pause's longest write: %+v", r.PauseWaits)
	}
	ops[0].End = at(7000) // now the probe sent before the pause waited longest
	r = Check(ops, faults, cfg)
	if r.MaxPauseWait != 7500*time.Millisecond || r.PauseWaits[0].Op != "op 3 push on P3: 201 after 7.51s" {
		t.Fatalf("a write sent just before the pause and held through it: longest wait %s (%s), want 7.5s from the pause's start", r.MaxPauseWait, r.PauseWaits[0].Op)
	}
	// A write sent long before the pause (slow for the load's reasons)
	// waited for the paused process only from its start: 4s of its 8s.
	ops[1].Start, ops[1].End = at(-3500), at(4500)
	ops[0].End = at(4000)
	cfg.PauseBound = 5 * time.Second
	r = Check(ops, faults, cfg)
	if r.MaxPauseWait != 4*time.Second || len(r.Anomalies) != 0 {
		t.Fatalf("a write of 8s sent 4s before the pause: longest wait %s, anomalies %v; want 4s and none", r.MaxPauseWait, r.Anomalies)
	}
	// A write held through this pause and the next one (another
	// process's, 1s after this one's end) is counted for this one up to
	// the next one's start: 11s of its 19.5s, under a bound of 12s.
	ops[1].Start, ops[1].End = at(490), at(20000)
	faults = append(faults, Fault{Kind: "pause", Proc: "P2", Start: at(11500), End: at(19000)})
	cfg.PauseBound = 12 * time.Second
	r = Check(ops, faults, cfg)
	if r.PauseWaits[0].Wait != 11*time.Second || len(r.Anomalies) != 0 {
		t.Fatalf("a write held through two pauses: the first's longest wait %s, anomalies %v; want 11s and none", r.PauseWaits[0].Wait, r.Anomalies)
	}
	faults = faults[:1]
	cfg.PauseBound = 0
	ops[1].Start, ops[1].End = at(490), at(8000)
	ops[0].End = at(9000)
	r = Check(ops, faults, cfg)
	if r.MaxPauseWait != 8*time.Second || len(r.Anomalies) != 0 {
		t.Fatalf("without a bound: longest wait %s, anomalies %v; want 8s and none", r.MaxPauseWait, r.Anomalies)
	}
	cfg.PauseBound = 5 * time.Second
	r = Check(ops, faults, cfg)
	if len(r.Anomalies) != 1 || !strings.Contains(r.Anomalies[0], "waited 8s (bound 5s)") {
		t.Fatalf("with a bound of 5s: %v", r.Anomalies)
	}
}
