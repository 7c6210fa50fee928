package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// search runs a search with limit 50 and fails the test on error.
func (s *bundle) search(q string) broker.SearchResult {
	s.t.Helper()
	res, err := s.b.Search(s.ctx, q, 50)
	if err != nil {
		s.t.Fatalf("search %q: %v", q, err)
	}
	return res
}

// failFor pops one message of queue for group and files it as a dead
// letter with the error.
func (s *bundle) failFor(queue, group, errText string) broker.Delivery {
	s.t.Helper()
	res := s.pop(queue, group, 1)
	if len(res.Messages) != 1 {
		s.t.Fatalf("pop %s for %s: %d messages", queue, group, len(res.Messages))
	}
	d := res.Messages[0]
	s.ack(d, broker.AckDLQ, errText)
	return d
}

// hitsOf describes hits as queue/group/txid/match, in order.
func hitsOf(res broker.SearchResult) []string {
	var out []string
	for _, h := range res.Hits {
		out = append(out, fmt.Sprintf("%s/%s/%s/%s", h.Queue, h.Group, h.TransactionID, h.Match))
	}
	return out
}

func wantHits(t *testing.T, q string, res broker.SearchResult, want ...string) {
	t.Helper()
	if got := hitsOf(res); !slices.Equal(got, want) {
		t.Fatalf("search %q: hits %q, want %q", q, got, want)
	}
}

func testSearchByWholeMessageID(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("orders", "p", "ord-1", "ord-2")
	d := s.failFor("orders", "billing", "card_declined")
	s.clock.Advance(time.Second)
	s.failFor("orders", "analytics", "timeout") // ord-1 again, in another group
	id := d.ID()

	res := s.search(id)
	// Both groups' dead letters, newest failure first.
	wantHits(t, id, res, "orders/analytics/ord-1/message id", "orders/billing/ord-1/message id")
	if !res.Hits[0].IsDeadLetter || res.Hits[1].Error != "card_declined" || res.Hits[1].MessageID() != id {
		t.Fatalf("hit: %+v", res.Hits[1])
	}
	if !slices.Contains(res.As, broker.MatchMessageID) {
		t.Fatalf("searched as %v", res.As)
	}
	// Typed in capitals, with spaces around it: the same.
	wantHits(t, id, s.search("  "+strings.ToUpper(id)+" "), "orders/analytics/ord-1/message id", "orders/billing/ord-1/message id")
	// The right seq with another time is no id of ours.
	other := broker.MessageID(d.CreatedAt.Add(time.Millisecond), d.Seq)
	wantHits(t, other, s.search(other))
}

func testSearchByShortID(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	// Messages over several windows of 65.5 s, so that the binary search
	// has boundaries to find; a deleted queue leaves gaps in the seqs.
	var ids []string
	for i := range 40 {
		q := "orders"
		if i%5 == 0 {
			q = "doomed"
		}
		r := s.push(q, "p", fmt.Sprintf("ord-%d", i))
		ids = append(ids, r[0].MessageID)
		s.clock.Advance(7 * time.Second)
	}
	if err := s.b.DeleteQueue(s.ctx, "doomed", "test"); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		short := id[:8] + "…" + id[len(id)-4:]
		res := s.search(short)
		if i%5 == 0 {
			wantHits(t, short, res)
			continue
		}
		if len(res.Hits) != 1 || res.Hits[0].MessageID() != id || res.Hits[0].Match != broker.MatchShortID || res.Hits[0].IsDeadLetter {
			t.Fatalf("short id %s of message %d: %+v", short, i, res.Hits)
		}
		if h := res.Hits[0]; h.Queue != "orders" || h.Partition != "p" || h.TransactionID != fmt.Sprintf("ord-%d", i) {
			t.Fatalf("short id %s: hit %+v", short, h)
		}
	}
	// Typed with three dots, in capitals: the same.
	id := ids[7]
	if res := s.search(strings.ToUpper(id[:8]) + "..." + id[len(id)-4:]); len(res.Hits) != 1 || res.Hits[0].MessageID() != id {
		t.Fatalf("short id with dots: %+v", res.Hits)
	}
	// The right ends with the wrong seq, or the wrong window: nothing.
	for _, q := range []string{id[:8] + "…ffff", "00000000…" + id[len(id)-4:]} {
		wantHits(t, q, s.search(q))
	}

	// A dead letter found by its short id opens as the dead letter.
	d := s.failFor("orders", "billing", "boom")
	short := d.ID()[:8] + "…" + d.ID()[len(d.ID())-4:]
	wantHits(t, short, s.search(short), "orders/billing/"+d.TransactionID+"/short message id")
}

func testSearchByTransactionID(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("orders", map[string]any{"retryLimit": 0})
	s.push("orders", "acme", "ord-1")
	s.push("orders", "initech", "ord-1") // the same transactionId in another partition
	s.push("orders", "acme", "ord-10", "ord-11")
	s.push("emails", "p", "ord-12")
	s.failFor("orders", "billing", "declined") // ord-1 of acme

	// Exact: the dead letter, and the message of the other partition,
	// which is no dead letter, with where it is.
	res := s.search("ord-1")
	wantHits(t, "ord-1", res, "orders/billing/ord-1/transactionId", "orders//ord-1/transactionId")
	m := res.Hits[1]
	if m.IsDeadLetter || m.Partition != "initech" || len(m.Places) != 1 || m.Places[0] != (broker.GroupPlace{Group: "billing", State: broker.PlacePending}) {
		t.Fatalf("message hit: %+v", m)
	}
	// An exact match is not widened to the prefix.
	if slices.Contains(res.As, broker.MatchTransactionPrefix) {
		t.Fatalf("searched as %v", res.As)
	}

	// A prefix: every queue; dead letters first.
	res = s.search("ord-1")
	_ = res
	res = s.search("ord")
	if len(res.Hits) != 5 || !res.Hits[0].IsDeadLetter || res.Hits[0].Match != broker.MatchTransactionPrefix {
		t.Fatalf("prefix ord: %q", hitsOf(res))
	}
	var queues []string
	for _, h := range res.Hits {
		queues = append(queues, h.Queue)
	}
	if !slices.Contains(queues, "emails") {
		t.Fatalf("prefix ord: not across queues: %q", hitsOf(res))
	}
	// Over the limit: says there is more.
	res, err := s.b.Search(s.ctx, "ord-1", 1)
	if err != nil || len(res.Hits) != 1 || !res.More {
		t.Fatalf("limit 1: %+v, %v", res, err)
	}
	// Case matters in a transactionId: ORD-1 is none, and is found
	// only as words of its payload ({"tx":"ord-1"}), which are not.
	wantHits(t, "ORD-1", s.search("ORD-1"), "orders/billing/ord-1/text")
}

func testSearchShowsWhereAMessageIs(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.configure("orders", map[string]any{"retryLimit": 2, "retryDelay": 0})
	s.push("orders", "p", "ord-1", "ord-2")
	// billing: completes ord-1; analytics: leases ord-1; audit: fails it once.
	d := s.pop("orders", "billing", 1).Messages[0]
	s.ack(d, broker.AckCompleted, "")
	s.pop("orders", "analytics", 1)
	a := s.pop("orders", "audit", 1).Messages[0]
	s.ack(a, broker.AckFailed, "try again")

	res := s.search("ord-1")
	if len(res.Hits) != 1 || res.Hits[0].IsDeadLetter {
		t.Fatalf("hits %q", hitsOf(res))
	}
	want := []broker.GroupPlace{
		{Group: "analytics", State: broker.PlaceLeased},
		{Group: "audit", State: broker.PlaceRetrying, Retries: 1},
		{Group: "billing", State: broker.PlaceSettled},
	}
	if got := res.Hits[0].Places; !slices.Equal(got, want) {
		t.Fatalf("places %+v, want %+v", got, want)
	}
	// ord-2: pending in every group.
	for _, p := range s.search("ord-2").Hits[0].Places {
		if p.State != broker.PlacePending {
			t.Fatalf("ord-2: %+v", p)
		}
	}
}

func testSearchFindsAReplayedMessageAndItsCopy(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("orders", "p", "ord-1")
	d := s.failFor("orders", "billing", "declined")
	rep, err := s.b.Replay(s.ctx, d.ID(), "test")
	if err != nil {
		t.Fatal(err)
	}
	res := s.search(d.ID())
	if len(res.Hits) != 1 || res.Hits[0].IsDeadLetter || res.Hits[0].ReplayedAs != rep.MessageID ||
		res.Hits[0].Places[0].State != broker.PlaceSettled {
		t.Fatalf("the replayed original: %+v", res.Hits)
	}
	res = s.search(rep.MessageID)
	if len(res.Hits) != 1 || res.Hits[0].TransactionID != broker.ReplayPrefix+d.ID() || res.Hits[0].Places[0].State != broker.PlacePending {
		t.Fatalf("the copy: %+v", res.Hits)
	}
}

func testSearchByTraceID(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	trace := "4bf92f3577b34da6a3ce929d0e0e4736"
	items := []broker.PushItem{
		{Queue: "orders", Partition: "p", TransactionID: "ord-1", TraceID: trace, Payload: []byte(`{}`)},
		{Queue: "orders", Partition: "p", TransactionID: "ord-2", TraceID: trace, Payload: []byte(`{}`)},
		{Queue: "orders", Partition: "p", TransactionID: "ord-3", TraceID: "other", Payload: []byte(`{}`)},
	}
	if _, err := s.b.Push(s.ctx, items); err != nil {
		t.Fatal(err)
	}
	s.failFor("orders", "billing", "declined")
	// The dead letter of the trace; ord-2 has it too, but is no dead
	// letter: messages are not searched by traceId (no index on them).
	res := s.search(trace)
	wantHits(t, trace, res, "orders/billing/ord-1/traceId")
	if res.Hits[0].TraceID != trace {
		t.Fatalf("hit %+v", res.Hits[0])
	}
	wantHits(t, trace[:10], s.search(trace[:10])) // exact only
}

func testSearchFindsNothing(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("orders", "p", "ord-1")
	s.failFor("orders", "billing", "declined")
	for _, q := range []string{
		"nothing-here",
		`' OR 1=1 --`,
		`"); DROP TABLE dead_letters; --`,
		"%", "_", "ord_1", "*", `\`,
		"nul\x00byte",
		"01a22fe6…0007",
		"0190c2a4-7a2b-7000-8000-000000000001",
		strings.Repeat("x", broker.MaxSearchBoxText),
	} {
		res := s.search(q)
		if len(res.Hits) != 0 || res.More {
			t.Errorf("search %q: %q", q, hitsOf(res))
		}
	}
	// Still there, once.
	wantHits(t, "ord-1", s.search("ord-1"), "orders/billing/ord-1/transactionId")
}

func testSearchRefusesBadText(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	for name, q := range map[string]string{
		"empty":    "  ",
		"too long": strings.Repeat("x", 10<<10),
		"not UTF8": "ord-\xff\xfe",
	} {
		_, err := s.b.Search(s.ctx, q, 50)
		var be *broker.Error
		if !errors.Is(err, broker.ErrInvalid) || !errors.As(err, &be) || be.Message == "" {
			t.Errorf("%s: %v, want ErrInvalid with a message", name, err)
		}
	}
	for _, limit := range []int{0, broker.MaxPageSize + 1} {
		if _, err := s.b.Search(s.ctx, "x", limit); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
}

// Text that is no id of anything is searched for as words in dead
// letters' payloads and error texts.
func testSearchFallsBackToWordsInPayloadsAndErrors(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	items := []broker.PushItem{
		{Queue: "payments", Partition: "p", TransactionID: "pay-77", Payload: []byte(`{"orderId":"ord_8Zk2Q","amount":4200}`)},
		{Queue: "payments", Partition: "p", TransactionID: "pay-78", Payload: []byte(`{"orderId":"ord_9Xy1R","amount":100}`)},
		{Queue: "payments", Partition: "p", TransactionID: "pay-79", Payload: []byte(`{"orderId":"ord_8Zk2Q-refund"}`)},
	}
	if _, err := s.b.Push(s.ctx, items); err != nil {
		t.Fatal(err)
	}
	s.failFor("payments", "ledger", "card declined: insufficient_funds")
	s.failFor("payments", "ledger", "card declined: insufficient_funds")
	s.failFor("payments", "ledger", "upstream timeout")

	// Only in a payload: the payment, found as text.
	res := s.search("ord_8Zk2Q")
	wantHits(t, "ord_8Zk2Q", res, "payments/ledger/pay-77/text")
	if res.As[len(res.As)-1] != broker.MatchText || res.Hits[0].Payload != nil {
		t.Fatalf("searched as %v; payload %q", res.As, res.Hits[0].Payload)
	}
	// In error texts: several, newest first.
	wantHits(t, "insufficient_funds", s.search("insufficient_funds"), "payments/ledger/pay-78/text", "payments/ledger/pay-77/text")
	// An id match is not widened to text: pay-7 is a transactionId prefix.
	if res := s.search("pay-7"); len(res.Hits) != 3 || slices.Contains(res.As, broker.MatchText) {
		t.Fatalf("pay-7: %q as %v", hitsOf(res), res.As)
	}
	// Text the word search cannot take (no word; over its 256 bytes):
	// no match, not an error.
	for _, q := range []string{"!!!", strings.Repeat("w ", 200)} {
		if res := s.search(q); len(res.Hits) != 0 {
			t.Fatalf("%q: %q", q, hitsOf(res))
		}
	}
}

// FuzzSearch is the search box's fuzz target, on a store of harness (call
// it from a Fuzz function of the store's package). Whatever the text, a
// search answers hits or ErrInvalid: never another error, never more
// than the limit, and only hits that match it.
func FuzzSearch(f *testing.F, harness Harness) {
	ctx := context.Background()
	d, err := harness.Open(ctx, harness.New(f, "lazarus.db"), Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	var items []broker.PushItem
	for i := range 20 {
		items = append(items, broker.PushItem{Queue: "orders", Partition: fmt.Sprintf("p%d", i%3), TransactionID: fmt.Sprintf("ord-%d", i),
			TraceID: fmt.Sprintf("trace-%d", i%4), Payload: []byte(fmt.Sprintf(`{"orderId":"ord_%d","n":%d}`, i, i))})
	}
	res, err := b.Push(ctx, items)
	if err != nil {
		f.Fatal(err)
	}
	pop, err := b.Pop(ctx, broker.PopRequest{Queue: "orders", Group: "billing", Batch: 5})
	if err != nil {
		f.Fatal(err)
	}
	for _, m := range pop.Messages {
		if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: pop.LeaseID, Status: broker.AckDLQ, Error: "declined: " + m.TransactionID, Group: "billing"}); err != nil {
			f.Fatal(err)
		}
	}
	id := res[0].MessageID
	for _, seed := range []string{id, strings.ToUpper(id), id[:8] + "…" + id[len(id)-4:], id[:8] + "..." + id[len(id)-4:], "ord-1", "ord", "trace-1",
		"ord_3", `"declined ord"`, "' OR 1=1 --", "%", "\x00", "ord-\xff", "…", strings.Repeat("a", broker.MaxSearchBoxText+1)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, q string) {
		res, err := b.Search(ctx, q, 10)
		if err != nil {
			if !errors.Is(err, broker.ErrInvalid) {
				t.Fatalf("search %q: %v", q, err)
			}
			return
		}
		if len(res.Hits) > 10 {
			t.Fatalf("search %q: %d hits over the limit", q, len(res.Hits))
		}
		tq := strings.TrimSpace(q)
		for _, h := range res.Hits {
			ok := false
			switch h.Match {
			case broker.MatchMessageID:
				ok = strings.EqualFold(h.MessageID(), tq)
			case broker.MatchShortID:
				mid := h.MessageID()
				ok = strings.EqualFold(mid[:8], tq[:8]) && strings.EqualFold(mid[len(mid)-4:], tq[len(tq)-4:])
			case broker.MatchTransactionID:
				ok = h.TransactionID == tq
			case broker.MatchTransactionPrefix:
				ok = strings.HasPrefix(h.TransactionID, tq)
			case broker.MatchTraceID:
				ok = h.TraceID == tq
			case broker.MatchText:
				ok = h.IsDeadLetter
			}
			if !ok {
				t.Fatalf("search %q: hit %s %s matched as %s", q, h.MessageID(), h.TransactionID, h.Match)
			}
		}
	})
}
