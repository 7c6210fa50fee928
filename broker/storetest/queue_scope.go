package storetest

import (
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A queue scope leaves the other queues out of every list and count the
// broker answers, and out of what a job made within it does; a scope
// that allows nothing lists nothing (DASHBOARD.md, "Who sees what").
func testQueueScopesLeaveOtherQueuesOut(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.push("orders-eu", "p", "o1", "o2", "o3")
	s.push("billing", "p", "b1", "b2")
	deadLetterAll(t, s, "orders-eu", "g", 3, func(int) string { return "card declined" })
	deadLetterAll(t, s, "billing", "g", 2, func(int) string { return "card declined" })
	orders := broker.MustParseQueueScope("orders*")
	nothing := broker.MustParseQueueScope("nothing*")

	queuesOf := func(dls []broker.DeadLetter) map[string]int {
		out := map[string]int{}
		for _, d := range dls {
			out[d.Queue]++
		}
		return out
	}
	for _, c := range []struct {
		name  string
		q     broker.DLQQuery
		want  int
		total int64
	}{
		{"EveryQueue", broker.DLQQuery{WithTotal: true}, 5, 5},
		{"Scoped", broker.DLQQuery{Scope: orders, WithTotal: true}, 3, 3},
		{"ScopedText", broker.DLQQuery{Scope: orders, Text: "declined", WithTotal: true}, 3, 3},
		{"ScopedErrorContains", broker.DLQQuery{Scope: orders, ErrorContains: "card", WithTotal: true}, 3, 3},
		{"QueueOutOfScope", broker.DLQQuery{Scope: orders, Queue: "billing", WithTotal: true}, 0, 0},
		{"ScopeOfNothing", broker.DLQQuery{Scope: nothing, WithTotal: true}, 0, 0},
	} {
		page, err := s.b.DeadLetters(s.ctx, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(page.Items) != c.want || page.Total != c.total {
			t.Errorf("%s: %d listed (%v), total %d; want %d, %d", c.name, len(page.Items), queuesOf(page.Items), page.Total, c.want, c.total)
		}
		if c.q.Scope.Equal(orders) && queuesOf(page.Items)["billing"] > 0 {
			t.Errorf("%s: billing listed", c.name)
		}
	}

	if n, err := s.b.CountMatching(s.ctx, broker.DLQQuery{AllQueues: true, Scope: orders}); err != nil || n.Count != 3 {
		t.Errorf("count matching in scope: %+v %v", n, err)
	}
	res, err := s.b.SearchIn(s.ctx, "b1", 10, orders)
	if err != nil || len(res.Hits) != 0 {
		t.Errorf("search of billing's transaction id in scope: %+v %v", res.Hits, err)
	}
	if res, err := s.b.SearchIn(s.ctx, "o1", 10, orders); err != nil || len(res.Hits) == 0 {
		t.Errorf("search of orders' transaction id in scope: %+v %v", res.Hits, err)
	}

	gs, err := s.b.ErrorGroupList(s.ctx, broker.ErrorGroupFilter{Scope: orders, Limit: 50})
	if err != nil || len(gs) != 1 || gs[0].Queue != "orders-eu" {
		t.Errorf("error groups in scope: %+v %v", gs, err)
	}
	if gs, err := s.b.ErrorGroupList(s.ctx, broker.ErrorGroupFilter{Scope: nothing, Limit: 50}); err != nil || len(gs) != 0 {
		t.Errorf("error groups of a scope of nothing: %d %v", len(gs), err)
	}

	ov, err := s.b.Overview(s.ctx, broker.OverviewQuery{Scope: orders})
	if err != nil || ov.Queues != 1 || ov.Depth != 3 || len(ov.Rows) != 1 || ov.Rows[0].Name != "orders-eu" {
		t.Errorf("overview in scope: %d queues, depth %d, %d rows, %v", ov.Queues, ov.Depth, len(ov.Rows), err)
	}
	if names, n, err := s.b.FindQueuesIn(s.ctx, "", 10, orders); err != nil || n != 1 || len(names) != 1 || names[0] != "orders-eu" {
		t.Errorf("picker in scope: %v %d %v", names, n, err)
	}
	ms, err := s.b.ListMessages(s.ctx, broker.MessageListQuery{Scope: orders})
	if err != nil || len(ms) != 3 {
		t.Errorf("messages in scope: %d %v", len(ms), err)
	}

	// A job by filter over every queue, made within the scope, deletes
	// only its queues' dead letters; one made by ids skips the others'.
	j, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobDelete, Query: &broker.DLQQuery{AllQueues: true}, Scope: orders, Actor: "user:support"})
	if err != nil || j.Planned != 3 {
		t.Fatalf("job in scope: %+v %v", j, err)
	}
	if j, err = s.b.RunJob(s.ctx, j.ID); err != nil || j.Done != 3 {
		t.Fatalf("job run: %+v %v", j, err)
	}
	left, err := s.b.DeadLetters(s.ctx, broker.DLQQuery{WithTotal: true})
	if err != nil || left.Total != 2 || queuesOf(left.Items)["billing"] != 2 {
		t.Fatalf("after the scoped job: %v %v", queuesOf(left.Items), err)
	}
	j, err = s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobDelete, IDs: []string{left.Items[0].MessageID()}, Scope: orders, Actor: "user:support"})
	if err != nil || j.Queue != "" {
		t.Fatalf("job by ids of another queue: queue %q, %v", j.Queue, err)
	}
	if j, err = s.b.RunJob(s.ctx, j.ID); err != nil || j.Done != 0 || j.Skipped != 1 {
		t.Fatalf("job by ids out of scope: %+v %v", j, err)
	}
	if left, _ := s.b.DeadLetters(s.ctx, broker.DLQQuery{WithTotal: true}); left.Total != 2 {
		t.Fatalf("a job by ids deleted out of its scope: %d left", left.Total)
	}

	// Jobs and audit entries of other queues are as if absent.
	if _, err := s.b.StartJob(s.ctx, broker.JobRequest{Kind: broker.JobDelete, Query: &broker.DLQQuery{Queue: "billing"}, Actor: "user:root"}); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.b.Jobs(s.ctx, broker.JobFilter{Scope: orders}, broker.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Queue != "" && j.Queue != "orders-eu" || j.Queue == "" {
			t.Errorf("job of %q listed in scope", j.Queue)
		}
	}
	entries, err := s.b.Audit(s.ctx, broker.AuditFilter{Scope: orders, Stream: broker.AuditStreamAll}, broker.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range entries {
		if a.Queue == "billing" {
			t.Errorf("audit entry of billing listed in scope: %+v", a)
		}
	}
	all, _ := s.b.Audit(s.ctx, broker.AuditFilter{Stream: broker.AuditStreamAll}, broker.Page{Limit: 100})
	if len(all) <= len(entries) {
		t.Errorf("the scoped audit left nothing out: %d of %d", len(entries), len(all))
	}
}
