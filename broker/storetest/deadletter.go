package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// fail pops n messages for group and acks each dlq with errText.
func (s *bundle) fail(queue, group string, n int, errText string) {
	s.t.Helper()
	for i := 0; i < n; i++ {
		_, res := s.popTxids(queue, group, 1)
		if len(res.Messages) != 1 {
			s.t.Fatalf("fail: nothing to pop for %s (%d of %d)", group, i, n)
		}
		if r := s.ack(res.Messages[0], broker.AckDLQ, errText); !r.DLQ {
			s.t.Fatalf("fail: %+v", r)
		}
	}
}

// drain pops everything the group can get now and acks it completed.
func (s *bundle) drain(queue, group string) []string {
	s.t.Helper()
	var all []string
	for {
		ids, res := s.popTxids(queue, group, 100)
		if len(ids) == 0 {
			return all
		}
		for _, m := range res.Messages {
			s.ack(m, broker.AckCompleted, "")
		}
		all = append(all, ids...)
	}
}

func testReplay(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "p", "a", "b")
	s.fail("q", "billing", 1, "declined")   // a
	s.fail("q", "analytics", 1, "bad data") // a, in another group
	d := s.dead("q", "billing")[0]
	res, err := s.b.Replay(s.ctx, d.MessageID(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != broker.StatusQueued || res.TransactionID != "dlq:"+d.MessageID() || res.Partition != "p" || res.Queue != "q" {
		t.Fatalf("replay result %+v", res)
	}
	t.Run("RemovesTheDeadLettersOfEveryGroup", func(t *testing.T) {
		if n := len(s.dead("q", "billing")) + len(s.dead("q", "analytics")); n != 0 {
			t.Fatalf("%d dead letters left", n)
		}
	})
	t.Run("CopyAtTheEndForEveryGroup", func(t *testing.T) {
		for _, g := range []string{"billing", "analytics", "newcomer"} {
			got := s.drain("q", g)
			want := []string{"b", "dlq:" + d.MessageID()}
			if g == "newcomer" {
				want = []string{"a", "b", "dlq:" + d.MessageID()}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s reads %v, want %v", g, got, want)
			}
		}
	})
	t.Run("SecondReplayFindsNothing", func(t *testing.T) {
		if _, err := s.b.Replay(s.ctx, d.MessageID(), "alice"); !errors.Is(err, broker.ErrNotFound) {
			t.Fatalf("err %v, want ErrNotFound", err)
		}
	})
	t.Run("CountsAndAudit", func(t *testing.T) {
		st := s.stats("q", "billing")
		if st.Depth != 0 || st.Replayed != 1 || st.DeadLettered != 1 {
			t.Fatalf("billing stats %+v", st)
		}
		entries, err := s.b.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditReplay}, broker.Page{Limit: 10})
		if err != nil || len(entries) != 1 || entries[0].Actor != "alice" || entries[0].Queue != "q" || entries[0].Count != 1 {
			t.Fatalf("audit %+v %v", entries, err)
		}
		filed, err := s.b.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditDeadLetter}, broker.Page{Limit: 10})
		if err != nil || len(filed) != 2 {
			t.Fatalf("dead-letter audit %+v %v", filed, err)
		}
	})
}

func testReplayedCopyCanFailAgainAndIsToldApart(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "", "a")
	s.fail("q", "g", 1, "first")
	d := s.dead("q", "g")[0]
	if d.IsReplay() {
		t.Fatal("original marked as replay")
	}
	if _, err := s.b.Replay(s.ctx, d.MessageID(), "dev"); err != nil {
		t.Fatal(err)
	}
	s.fail("q", "g", 1, "again")
	again := s.dead("q", "g")
	if len(again) != 1 || !again[0].IsReplay() || again[0].Error != "again" || string(again[0].Payload) != string(d.Payload) {
		t.Fatalf("second dead letter %+v", again)
	}
}

// A group that dead-letters the original after it was replayed for another
// group: its replay finds the copy already there and makes no second one.
func testReplayWhenCopyExistsIsADuplicate(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "", "a")
	s.fail("q", "fast", 1, "x")
	id := s.dead("q", "fast")[0].MessageID()
	if _, err := s.b.Replay(s.ctx, id, "dev"); err != nil {
		t.Fatal(err)
	}
	s.fail("q", "slow", 1, "y") // slow reaches the original only now
	res, err := s.b.Replay(s.ctx, id, "dev")
	if err != nil || res.Status != broker.StatusDuplicate {
		t.Fatalf("second replay %+v %v, want duplicate", res, err)
	}
	if d := s.dead("q", "slow"); len(d) != 0 {
		t.Fatalf("slow still has %d dead letters", len(d))
	}
	if got := s.drain("q", "slow"); !slices.Equal(got, []string{"dlq:" + id}) {
		t.Fatalf("slow reads %v: want exactly one copy", got)
	}
}

func testReplayByTransaction(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	r := s.push("q", "p", "a")
	s.fail("q", "g", 1, "x")
	res, err := s.b.ReplayTransaction(s.ctx, r[0].PartitionID, "a", "dev")
	if err != nil || res.TransactionID != "dlq:"+r[0].MessageID {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := s.b.ReplayTransaction(s.ctx, r[0].PartitionID, "nope", "dev"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("unknown transaction: %v", err)
	}
}

func testDelete(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("q", "", "a", "b")
	s.fail("q", "g1", 1, "x")
	s.fail("q", "g2", 1, "x")
	id := s.dead("q", "g1")[0].MessageID()
	t.Run("OneGroup", func(t *testing.T) {
		n, err := s.b.Delete(s.ctx, id, "g1", "dev")
		if err != nil || n != 1 {
			t.Fatalf("%d %v", n, err)
		}
		if len(s.dead("q", "g1")) != 0 || len(s.dead("q", "g2")) != 1 {
			t.Fatal("wrong dead letters removed")
		}
	})
	t.Run("AllGroupsAndNothingElse", func(t *testing.T) {
		n, err := s.b.Delete(s.ctx, id, "", "dev")
		if err != nil || n != 1 {
			t.Fatalf("%d %v", n, err)
		}
		if got := s.drain("q", "g1"); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("g1 reads %v: a delete must not push anything", got)
		}
		if st := s.stats("q", "g2"); st.Depth != 0 || st.Deleted != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("UnknownID", func(t *testing.T) {
		for _, bad := range []string{id, "not-an-id", broker.MessageID(time.Now(), 99999)} {
			if _, err := s.b.Delete(s.ctx, bad, "", "dev"); !errors.Is(err, broker.ErrNotFound) {
				t.Errorf("%s: %v", bad, err)
			}
		}
	})
}

// fill pushes n messages to each of the partitions and dead-letters them
// all for group, with error texts "err-<partition>".
func (s *bundle) fill(queue, group string, partitions []string, n int) {
	s.t.Helper()
	for _, p := range partitions {
		var ids []string
		for i := 0; i < n; i++ {
			ids = append(ids, fmt.Sprintf("%s-%d", p, i))
		}
		s.push(queue, p, ids...)
		for i := 0; i < n; i++ {
			res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: queue, Partition: p, Group: group})
			if err != nil || len(res.Messages) != 1 {
				s.t.Fatalf("fill pop: %v %v", res, err)
			}
			s.ack(res.Messages[0], broker.AckDLQ, "err-"+p)
			s.clock.Advance(time.Second)
		}
	}
}

func testBulkReplayByIDs(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 5)
	dead := s.dead("q", "g")
	ids := []string{dead[0].MessageID(), dead[1].MessageID(), dead[1].MessageID(), "bogus"}
	res, err := s.b.ReplayIDs(s.ctx, ids, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if res.JobID == 0 || res != (broker.BulkResult{Done: 2, Skipped: 1, JobID: res.JobID}) {
		t.Fatalf("result %+v", res)
	}
	if n := len(s.dead("q", "g")); n != 3 {
		t.Fatalf("%d dead letters left, want 3", n)
	}
	again, err := s.b.ReplayIDs(s.ctx, ids[:2], "dev")
	if err != nil || again != (broker.BulkResult{Skipped: 2, JobID: again.JobID}) {
		t.Fatalf("again %+v %v", again, err)
	}
	got := s.drain("q", "g")
	if len(got) != 2 {
		t.Fatalf("copies %v, want 2", got)
	}
}

func testBulkByFilter(t *testing.T, harness Harness) {
	t.Parallel()
	// fill dead-letters p1's three messages at +0..2s, p2's at +3..5s.
	cases := []struct {
		name     string
		query    func(start time.Time) broker.DLQQuery
		replay   bool
		wantDone int
		wantLeft int
	}{
		{"ReplayByErrorText", func(time.Time) broker.DLQQuery { return broker.DLQQuery{Queue: "q", ErrorContains: "ERR-P1"} }, true, 3, 3},
		{"ReplayByPartition", func(time.Time) broker.DLQQuery { return broker.DLQQuery{Queue: "q", Partition: "p2"} }, true, 3, 3},
		{"DeleteByTimeRange", func(start time.Time) broker.DLQQuery {
			return broker.DLQQuery{Queue: "q", From: start.Add(time.Second), To: start.Add(4 * time.Second)}
		}, false, 3, 3},
		{"DeleteByGroup", func(time.Time) broker.DLQQuery { return broker.DLQQuery{Queue: "q", Group: "g"} }, false, 6, 0},
		{"UnknownGroupMatchesNothing", func(time.Time) broker.DLQQuery { return broker.DLQQuery{Queue: "q", Group: "nobody"} }, false, 0, 6},
		{"ReplayByTransactionID", func(time.Time) broker.DLQQuery { return broker.DLQQuery{Queue: "q", TransactionID: "p2-1"} }, true, 1, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			start := s.clock.Now()
			s.fill("q", "g", []string{"p1", "p2"}, 3)
			do := s.b.DeleteMatching
			if tc.replay {
				do = s.b.ReplayMatching
			}
			res, err := do(s.ctx, tc.query(start), "dev")
			if err != nil || res.Done != tc.wantDone {
				t.Fatalf("result %+v %v, want %d done", res, err, tc.wantDone)
			}
			if n := len(s.dead("q", "g")); n != tc.wantLeft {
				t.Fatalf("%d left, want %d", n, tc.wantLeft)
			}
			if got := s.stats("q", "g").Depth; got != int64(tc.wantLeft) {
				t.Fatalf("depth counter %d, want %d", got, tc.wantLeft)
			}
		})
	}
}

// Copies that fail again during a bulk replay are not replayed again by it.
func testBulkReplayReplaysEachMessageOnce(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 3)
	res, err := s.b.ReplayMatching(s.ctx, broker.DLQQuery{Queue: "q"}, "dev")
	if err != nil || res.Done != 3 {
		t.Fatalf("%+v %v", res, err)
	}
	s.fail("q", "g", 3, "again")
	res, err = s.b.ReplayMatching(s.ctx, broker.DLQQuery{Queue: "q"}, "dev")
	if err != nil || res.Done != 3 {
		t.Fatalf("second round %+v %v", res, err)
	}
	got := s.drain("q", "g")
	if len(got) != 3 {
		t.Fatalf("%v", got)
	}
	for _, id := range got {
		if !broker.IsReplayTransaction(id) {
			t.Fatalf("not a replay: %s", id)
		}
	}
}

func testDeadLetterListing(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p1", "p2"}, 5)
	all := s.dead("q", "g")
	if len(all) != 10 {
		t.Fatalf("%d", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].FailedAt.After(all[i-1].FailedAt) {
			t.Fatal("not newest first")
		}
	}
	t.Run("KeysetPagesCoverEverythingOnce", func(t *testing.T) {
		var got []int64
		q := broker.DLQQuery{Queue: "q", Group: "g", Limit: 3}
		for {
			page, err := s.b.DeadLetters(s.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page.Items {
				got = append(got, d.ID)
			}
			if page.Next == nil {
				break
			}
			q.After = page.Next
		}
		var want []int64
		for _, d := range all {
			want = append(want, d.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("keyset %v, want %v", got, want)
		}
	})
	t.Run("OffsetAndTotal", func(t *testing.T) {
		page, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{Queue: "q", Limit: 4, Offset: 8, WithTotal: true})
		if err != nil || page.Total != 10 || len(page.Items) != 2 || page.Items[0].ID != all[8].ID {
			t.Fatalf("%+v %v", page, err)
		}
	})
	t.Run("Filters", func(t *testing.T) {
		from := all[6].FailedAt
		to := all[2].FailedAt
		cases := []struct {
			q    broker.DLQQuery
			want int
		}{
			{broker.DLQQuery{Queue: "q", From: from, To: to}, 4},
			{broker.DLQQuery{Queue: "q", ErrorContains: "p2"}, 5},
			{broker.DLQQuery{Queue: "q", Partition: "p1"}, 5},
			{broker.DLQQuery{TransactionID: "p1-3"}, 1},
			{broker.DLQQuery{Group: "g"}, 10},
			{broker.DLQQuery{Queue: "other"}, 0},
		}
		for _, tc := range cases {
			page, err := s.b.DeadLetters(s.ctx, tc.q)
			if err != nil || len(page.Items) != tc.want {
				t.Errorf("%s: %d %v, want %d", tc.q.Describe(), len(page.Items), err, tc.want)
			}
		}
	})
	t.Run("BadQueries", func(t *testing.T) {
		for _, q := range []broker.DLQQuery{{Limit: 1001}, {Limit: -1}, {Offset: -1}, {From: all[0].FailedAt, To: all[1].FailedAt}} {
			if _, err := s.b.DeadLetters(s.ctx, q); !errors.Is(err, broker.ErrInvalid) {
				t.Errorf("%+v: %v", q, err)
			}
		}
	})
	t.Run("ErrorGroups", func(t *testing.T) {
		top, err := s.b.ErrorGroups(s.ctx, "q", "", "", 5)
		if err != nil || len(top) != 2 || top[0].DeadLetters != 5 || top[0].Fingerprint != "err-p1" {
			t.Fatalf("%+v %v", top, err)
		}
	})
}

// The list's error groups and total of a queue or group come from
// maintained counts; after filing, replaying and deleting they agree with
// a scan.
func testTriageCountsAgreeWithAScan(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p1", "p2", "p3"}, 4)
	s.fill("q", "h", []string{"p1"}, 3)
	// A multi-line error groups by its first line.
	s.push("q", "p9", "trace-1", "trace-2")
	for i := 0; i < 2; i++ {
		res, err := s.b.Pop(s.ctx, broker.PopRequest{Queue: "q", Partition: "p9", Group: "h"})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop p9: %+v %v", res, err)
		}
		s.ack(res.Messages[0], broker.AckDLQ, fmt.Sprintf("panic: nil map\ngoroutine %d [running]", i))
	}
	dead := s.dead("q", "g")
	if _, err := s.b.Replay(s.ctx, dead[0].MessageID(), "dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.b.Delete(s.ctx, dead[1].MessageID(), "g", "dev"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.b.DeleteMatching(s.ctx, broker.DLQQuery{Queue: "q", Partition: "p3"}, "dev"); err != nil {
		t.Fatal(err)
	}
	for _, group := range []string{"", "g", "h"} {
		q := broker.DLQQuery{Queue: "q", Group: group, Limit: 10, WithTotal: true}
		tr, err := s.b.Triage(s.ctx, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		all := q
		all.Limit = 100
		page, err := s.b.DeadLetters(s.ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Page.Total != page.Total || tr.Page.TotalCapped {
			t.Errorf("group %q: total %d (capped %v), a count says %d", group, tr.Page.Total, tr.Page.TotalCapped, page.Total)
		}
		if got, want := groupCounts(tr.ErrorGroups), scanGroups(page.Items); got != want {
			t.Errorf("group %q: error groups %v, a scan says %v", group, got, want)
		}
	}
	// A filter beyond queue and group counts by a bounded scan; the error
	// groups stay the queue's.
	tr, err := s.b.Triage(s.ctx, broker.DLQQuery{Queue: "q", ErrorContains: "panic", Limit: 10, WithTotal: true}, 5)
	if err != nil || tr.Page.Total != 2 || len(tr.ErrorGroups) != 3 {
		t.Fatalf("filtered triage: %+v %v", tr, err)
	}
	// An error group of the queue counts from its kept count.
	tr, err = s.b.Triage(s.ctx, broker.DLQQuery{Queue: "q", Fingerprint: "panic: nil map", Limit: 10, WithTotal: true}, 5)
	if err != nil || tr.Page.Total != 2 || len(tr.Page.Items) != 2 || len(tr.ErrorGroups) != 1 || tr.ErrorGroups[0].DeadLetters != 2 {
		t.Fatalf("triage of an error group: %+v %v", tr, err)
	}
}

// groupCounts and scanGroups say "fingerprint=count ..." sorted, of kept
// error groups and of dead letters.
func groupCounts(gs []broker.ErrorGroup) string {
	var out []string
	for _, g := range gs {
		out = append(out, fmt.Sprintf("%s=%d", g.Fingerprint, g.DeadLetters))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func scanGroups(dls []broker.DeadLetter) string {
	n := map[string]int64{}
	for _, d := range dls {
		if d.Fingerprint != broker.Fingerprint(d.Error) {
			return "fingerprint " + d.Fingerprint + " stored for " + d.Error
		}
		n[d.Fingerprint]++
	}
	var out []string
	for fp, c := range n {
		out = append(out, fmt.Sprintf("%s=%d", fp, c))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// Bulk deletes take a dead letter off the same error group it was counted
// under, whatever its text holds (a NUL, a line longer than the cut).
func testBulkDeleteKeepsErrorGroupsExact(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	long := strings.Repeat("é", 600) + "\nat main.go:1"
	texts := []string{"boom\x00tail\nstack", long, "plain"}
	for i, e := range texts {
		s.push("q", "", fmt.Sprintf("m%d", i))
		s.fail("q", "g", 1, e)
	}
	tri, err := s.b.Triage(s.ctx, broker.DLQQuery{Queue: "q", Group: "g", Limit: 10}, 10)
	if err != nil || len(tri.ErrorGroups) != 3 {
		t.Fatalf("error groups before: %+v %v", tri.ErrorGroups, err)
	}
	res, err := s.b.DeleteMatching(s.ctx, broker.DLQQuery{Queue: "q", Group: "g"}, "dev")
	if err != nil || res.Done != 3 {
		t.Fatalf("delete: %+v %v", res, err)
	}
	tri, err = s.b.Triage(s.ctx, broker.DLQQuery{Queue: "q", Group: "g", Limit: 10}, 10)
	if err != nil || len(tri.ErrorGroups) != 0 {
		t.Fatalf("error groups after deleting every dead letter: %+v %v", tri.ErrorGroups, err)
	}
}

// A bulk replay copies at most about 4 MiB of payloads in a transaction
// (never less than one message), whatever the count: ten payloads of a
// million bytes go in chunks of 4, 4 and 2, by list and by filter, each
// message once and in order.
func testBulkReplayChunksAreBoundedByPayloadBytes(t *testing.T, harness Harness) {
	t.Parallel()
	for _, byFilter := range []bool{false, true} {
		t.Run(fmt.Sprintf("by filter %v", byFilter), func(t *testing.T) {
			t.Parallel()
			s := setup(t, harness)
			big := `"` + strings.Repeat("x", 1_000_000-2) + `"`
			var items []broker.PushItem
			for i := range 10 {
				items = append(items, broker.PushItem{Queue: "q", Partition: "p", TransactionID: fmt.Sprintf("m%d", i), Payload: []byte(big)})
			}
			if _, err := s.b.Push(s.ctx, items); err != nil {
				t.Fatal(err)
			}
			s.fail("q", "g", 10, "boom")
			dead := s.dead("q", "g") // newest failure first
			r := broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q"}, Actor: "dev"}
			if !byFilter {
				ids := []string{"bogus"}
				for i := len(dead) - 1; i >= 0; i-- { // oldest first, one named twice
					ids = append(ids, dead[i].MessageID())
					if i == 5 {
						ids = append(ids, dead[i].MessageID(), "bogus-too")
					}
				}
				r = broker.JobRequest{Kind: broker.JobReplay, IDs: ids, Actor: "dev"}
			}
			j, err := s.b.StartJob(s.ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			// One chunk a transaction: the messages each replayed.
			var counts []int64
			for j.State == broker.JobRunning {
				done := j.Done
				if j, err = s.b.StepJob(s.ctx, j.ID); err != nil {
					t.Fatal(err)
				}
				if j.Done > done {
					counts = append(counts, j.Done-done)
				}
			}
			want := broker.BulkResult{Done: 10}
			if !byFilter {
				want.Skipped = 2
			}
			if got := (broker.BulkResult{Done: int(j.Done), Skipped: int(j.Skipped), Failed: int(j.Failed)}); got != want {
				t.Fatalf("result %+v, want %+v", got, want)
			}
			if fmt.Sprint(counts) != "[4 4 2]" {
				t.Fatalf("replayed in transactions of %v messages, want 4, 4 and 2", counts)
			}
			var got []string
			for _, id := range s.drain("q", "g") {
				got = append(got, strings.TrimPrefix(id, broker.ReplayPrefix))
			}
			var wantOrder []string
			for i := len(dead) - 1; i >= 0; i-- {
				wantOrder = append(wantOrder, dead[i].MessageID())
			}
			if byFilter {
				slices.Reverse(wantOrder) // newest failure first
			}
			if !slices.Equal(got, wantOrder) {
				t.Fatalf("copies of %v, want %v", got, wantOrder)
			}
		})
	}
}
