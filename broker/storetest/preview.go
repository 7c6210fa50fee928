package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// deadLetterAll has group pop and dead-letter up to n messages of queue,
// one at a time, a second apart, each with its error text errText(i).
func deadLetterAll(t *testing.T, s *bundle, queue, group string, n int, errText func(i int) string) {
	t.Helper()
	for i := range n {
		res := s.pop(queue, group, 1)
		if len(res.Messages) != 1 {
			t.Fatalf("pop %s/%s: %+v", queue, group, res)
		}
		s.ack(res.Messages[0], broker.AckDLQ, errText(i))
		s.clock.Advance(time.Second)
	}
}

func groupsOf(p broker.Preview) string {
	var out []string
	for _, g := range p.Groups {
		c := ""
		if g.Capped {
			c = "+"
		}
		out = append(out, fmt.Sprintf("%s=%d%s", g.Group, g.DeadLetters, c))
	}
	return strings.Join(out, " ")
}

func sampleOf(p broker.Preview) string {
	var out []string
	for _, d := range p.Sample {
		out = append(out, d.TransactionID+"/"+d.Group)
	}
	return strings.Join(out, " ")
}

// A confirmation by filter counts in the action's unit, per consumer
// group, and shows the five newest failures with their first error line;
// with the bound it gave, it counts the same set after more arrived.
func testPreviewByFilterCountsPerGroupAndSamples(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	var txids []string
	for i := range 7 {
		txids = append(txids, fmt.Sprintf("t%d", i))
	}
	s.push("q", "p", txids...)
	deadLetterAll(t, s, "q", "billing", 7, func(i int) string { return fmt.Sprintf("card declined %d\n\tat pay.go:%d", i, i) })
	deadLetterAll(t, s, "q", "mail", 3, func(int) string { return "smtp down" })

	q := broker.DLQQuery{Queue: "q"}
	p, err := s.b.Preview(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &q})
	if err != nil {
		t.Fatal(err)
	}
	if p.Count != 7 || p.DeadLetters != 10 || p.Messages != 7 || p.Bound == nil {
		t.Fatalf("replay to every group: %+v, want 7 messages of 10 dead letters and a bound", p)
	}
	if g := groupsOf(p); g != "billing=7 mail=3" {
		t.Fatalf("groups %q", g)
	}
	// Newest failure first: mail's three, then billing's last two.
	if got := sampleOf(p); got != "t2/mail t1/mail t0/mail t6/billing t5/billing" {
		t.Fatalf("sample %q", got)
	}
	if e := p.Sample[3].Error; e != "card declined 6" {
		t.Fatalf("sample error %q, want its first line", e)
	}
	if p.Sample[0].MessageID == "" || p.Sample[0].FailedAt.IsZero() || p.Sample[0].Queue != "q" {
		t.Fatalf("sample item %+v", p.Sample[0])
	}

	own, err := s.b.Preview(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Mode: broker.ReplayOwnGroup, Query: &q})
	if err != nil || own.Count != 10 {
		t.Fatalf("replay to own groups counts dead letters: %+v %v", own, err)
	}
	mail := broker.DLQQuery{Queue: "q", Group: "mail"}
	del, err := s.b.Preview(s.ctx, broker.JobRequest{Kind: broker.JobDelete, Query: &mail})
	if err != nil || del.Count != 3 || groupsOf(del) != "mail=3" || len(del.Sample) != 3 {
		t.Fatalf("delete of mail's: %+v %v", del, err)
	}

	// A search of the error text: counted by group (not kept), exactly
	// when below the cap.
	card := broker.DLQQuery{Queue: "q", ErrorContains: "card"}
	cp, err := s.b.Preview(s.ctx, broker.JobRequest{Kind: broker.JobDelete, Query: &card})
	if err != nil || cp.Count != 7 || groupsOf(cp) != "billing=7" {
		t.Fatalf("delete of card's: %+v %v", cp, err)
	}
	fp := broker.DLQQuery{Queue: "q", Fingerprint: broker.Fingerprint("smtp down")}
	if fpp, err := s.b.Preview(s.ctx, broker.JobRequest{Kind: broker.JobDelete, Query: &fp}); err != nil || fpp.Count != 3 || groupsOf(fpp) != "mail=3" {
		t.Fatalf("delete of an error group: %+v %v", fpp, err)
	}

	// With its bound, the same set after more failed.
	s.push("q", "p", "late")
	deadLetterAll(t, s, "q", "billing", 1, func(int) string { return "late" })
	bounded := q
	bounded.Bound = p.Bound
	again, err := s.b.Preview(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &bounded})
	if err != nil || again.Count != 7 || groupsOf(again) != "billing=7 mail=3" || sampleOf(again) != sampleOf(p) {
		t.Fatalf("preview at the bound after more arrived: %+v %v", again, err)
	}
	if now, _ := s.b.Preview(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &q}); now.Count != 8 || now.Sample[0].TransactionID != "late" {
		t.Fatalf("preview without a bound: %+v", now)
	}
}

// A confirmation by ids counts the dead letters of the messages still
// there, in the action's unit and per group.
func testPreviewByIDs(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a", "b", "c")
	deadLetterAll(t, s, "q", "billing", 2, func(int) string { return "x" })
	deadLetterAll(t, s, "q", "mail", 1, func(int) string { return "y" })
	dls := s.dead("q", "billing")
	ids := []string{dls[0].MessageID(), dls[1].MessageID(), broker.MessageID(s.clock.Now(), 999999), dls[0].MessageID()}
	p, err := s.b.Preview(s.ctx, broker.JobRequest{Kind: broker.JobReplay, IDs: ids})
	if err != nil || p.Count != 2 || p.DeadLetters != 3 || groupsOf(p) != "billing=2 mail=1" || len(p.Sample) != 3 || p.Bound != nil {
		t.Fatalf("replay by ids: %+v %v", p, err)
	}
	if p.Sample[0].Group != "mail" {
		t.Fatalf("sample %q, want the newest filed first", sampleOf(p))
	}
	d, err := s.b.Preview(s.ctx, broker.JobRequest{Kind: broker.JobDelete, IDs: ids, Group: "billing"})
	if err != nil || d.Count != 2 || groupsOf(d) != "billing=2" {
		t.Fatalf("delete of billing's by ids: %+v %v", d, err)
	}
	if o, err := s.b.Preview(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Mode: broker.ReplayOwnGroup, IDs: ids}); err != nil || o.Count != 3 {
		t.Fatalf("replay by ids to their own groups counts dead letters: %+v %v", o, err)
	}
}

func testPreviewRefusesBadRequests(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	q := broker.DLQQuery{Queue: "q"}
	for name, r := range map[string]broker.JobRequest{
		"NoKind":       {Query: &q},
		"Restore":      {Kind: broker.JobRestore, Query: &q},
		"BadMode":      {Kind: broker.JobReplay, Mode: "some", Query: &q},
		"DeleteMode":   {Kind: broker.JobDelete, Mode: broker.ReplayOwnGroup, Query: &q},
		"Neither":      {Kind: broker.JobDelete},
		"Both":         {Kind: broker.JobDelete, Query: &q, IDs: []string{"x"}},
		"NoQueue":      {Kind: broker.JobDelete, Query: &broker.DLQQuery{}},
		"GroupOutside": {Kind: broker.JobDelete, Query: &q, Group: "g"},
		"ReplayGroup":  {Kind: broker.JobReplay, IDs: []string{"x"}, Group: "g"},
		"TooManyIDs":   {Kind: broker.JobDelete, IDs: make([]string, broker.MaxBulkIDs+1)},
	} {
		if _, err := s.b.Preview(s.ctx, r); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
