package web_test

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestPopDelivers(t *testing.T) {
	t.Parallel()
	s := setup(t)
	a := s.push("q", "", "a", `{"b":1,"a":12345678901234567890}`)
	s.push("q", "", "b", `2`)
	s.push("q", "", "c", `3`)
	p := s.pop("q", "batch=2")
	if len(p.Messages) != 2 || p.Messages[0].TransactionID != "a" || p.Messages[1].TransactionID != "b" {
		t.Fatalf("popped %+v", p.Messages)
	}
	m := p.Messages[0]
	if m.ID != a.MessageID || m.PartitionID != a.PartitionID || m.Partition != "Default" || m.Queue != "q" ||
		m.ConsumerGroup != "__QUEUE_MODE__" || m.RetryCount != 0 || m.TraceID != nil {
		t.Fatalf("message %+v", m)
	}
	if string(m.Data) != `{"b":1,"a":12345678901234567890}` {
		t.Fatalf("data not byte-exact: %s", m.Data)
	}
	if m.LeaseID == nil || p.LeaseID == nil || *m.LeaseID != *p.LeaseID {
		t.Fatalf("lease ids %v %v", m.LeaseID, p.LeaseID)
	}
	if m.CreatedAt != "2026-11-01T12:00:00.000Z" {
		t.Fatalf("createdAt %q", m.CreatedAt)
	}
	// leaseTime defaults to 300 s.
	if p.LeaseExpiresAt == nil || *p.LeaseExpiresAt != "2026-11-01T12:05:00.000Z" {
		t.Fatalf("leaseExpiresAt %v", p.LeaseExpiresAt)
	}
	// The partition is leased: nothing more for queue mode until it is acked.
	s.call("GET", "/api/v1/pop/queue/q", "").want(http.StatusNoContent)
}

func TestPopEmpty(t *testing.T) {
	t.Parallel()
	s := setup(t)
	r := s.call("GET", "/api/v1/pop/queue/never-pushed", "").want(http.StatusNoContent)
	if len(r.body) != 0 {
		t.Fatalf("204 with body %q", r.body)
	}
	s.configure("empty", `{}`)
	s.call("GET", "/api/v1/pop/queue/empty?wait=false", "").want(http.StatusNoContent)
	// A short wait that times out is a 204 too.
	s.call("GET", "/api/v1/pop/queue/empty?wait=true&timeout=20", "").want(http.StatusNoContent)
}

func TestPopPartition(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "p1", "one", `1`)
	s.push("q", "p2", "two", `2`)
	var p popped
	s.call("GET", "/api/v1/pop/queue/q/partition/p2", "").want(http.StatusOK).decode(&p)
	if len(p.Messages) != 1 || p.Messages[0].TransactionID != "two" || p.Messages[0].Partition != "p2" {
		t.Fatalf("popped %+v", p.Messages)
	}
	s.call("GET", "/api/v1/pop/queue/q/partition/p2", "").want(http.StatusNoContent)
	s.call("GET", "/api/v1/pop/queue/q/partition/nope", "").want(http.StatusNoContent)
	s.call("GET", "/api/v1/pop/queue/q/partition/p1", "").want(http.StatusOK)
}

func TestPopConsumerGroups(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "old", `1`)

	// Each group reads every message, from the beginning by default.
	for _, g := range []string{"billing", "analytics"} {
		p := s.pop("q", "consumerGroup="+g)
		if p.Messages[0].TransactionID != "old" || p.Messages[0].ConsumerGroup != g {
			t.Fatalf("%s: %+v", g, p.Messages)
		}
	}
	// subscriptionMode=new and subscriptionFrom=now skip what was pushed.
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=fresh&subscriptionMode=new", "").want(http.StatusNoContent)
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=fresh2&subscriptionFrom=now", "").want(http.StatusNoContent)
	s.call("GET", "/api/v1/pop/queue/q?consumerGroup=all&subscriptionMode=all", "").want(http.StatusOK)

	// subscriptionFrom=<time> starts at the first message pushed then.
	s.clock.Advance(time.Minute)
	s.push("q", "", "new", `2`)
	for _, g := range []string{"fresh", "fresh2"} {
		if p := s.pop("q", "consumerGroup="+g); p.Messages[0].TransactionID != "new" {
			t.Fatalf("%s: %+v", g, p.Messages)
		}
	}
	p := s.pop("q", "consumerGroup=fromtime&batch=10&subscriptionFrom=2026-11-01T12:00:30Z")
	if len(p.Messages) != 1 || p.Messages[0].TransactionID != "new" {
		t.Fatalf("fromtime: %+v", p.Messages)
	}
}

func TestPopAutoAck(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "a", `1`)
	s.push("q", "", "b", `2`)
	p := s.pop("q", "autoAck=true")
	if p.LeaseID != nil || p.Messages[0].LeaseID != nil || p.Messages[0].TransactionID != "a" {
		t.Fatalf("auto-acked pop %+v", p)
	}
	// Nothing is leased: the next pop gets the next message at once.
	if p := s.pop("q", "autoAck=true"); p.Messages[0].TransactionID != "b" {
		t.Fatalf("second pop %+v", p.Messages)
	}
	s.ack(p.Messages[0], "completed", "").wantError(http.StatusConflict)
}

func TestPopRefusesBadQuery(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.push("q", "", "a", `1`)
	cases := []struct {
		name, query string
		want        []string
	}{
		{"BatchNotNumber", "batch=many", []string{"batch", "whole number"}},
		{"BatchZero", "batch=0", []string{"batch"}},
		{"BatchNegative", "batch=-1", []string{"batch"}},
		{"BatchTooBig", "batch=1001", []string{"batch"}},
		{"WaitNotBool", "wait=perhaps", []string{"wait", "true or false"}},
		{"AutoAckNotBool", "autoAck=2x", []string{"autoAck"}},
		{"TimeoutNotNumber", "wait=true&timeout=soon", []string{"timeout"}},
		{"TimeoutZero", "wait=true&timeout=0", []string{"timeout"}},
		{"PartitionsZero", "partitions=0", []string{"partitions"}},
		{"PartitionsTooMany", "partitions=1001", []string{"partitions"}},
		{"LeaseSecondsNegative", "leaseSeconds=-1", []string{"leaseSeconds"}},
		{"LeaseSecondsTooLong", "leaseSeconds=604801", []string{"leaseSeconds"}},
		{"BadFrom", "consumerGroup=g&subscriptionFrom=yesterday", []string{"subscriptionFrom"}},
		{"BadGroup", "consumerGroup=a%20b", []string{"consumer group"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := s.sub(t)
			s.call("GET", "/api/v1/pop/queue/q?"+tc.query, "").wantError(http.StatusBadRequest, tc.want...)
		})
	}
	s.call("GET", "/api/v1/pop/queue/bad%20name", "").wantError(http.StatusBadRequest, "queue name")
	// The refused pops leased nothing.
	if p := s.pop("q", ""); p.Messages[0].TransactionID != "a" {
		t.Fatalf("popped %+v", p.Messages)
	}
}

func TestPopWaitIsWokenByPush(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("lp", `{}`)
	done := make(chan response, 1)
	go func() {
		done <- s.call("GET", "/api/v1/pop/queue/lp?wait=true&timeout=20000&consumerGroup=waiter", "")
	}()
	// The group shows in the queue once the pop has looked and is waiting.
	waitFor(t, func() bool {
		var q queueInfo
		s.call("GET", "/api/v1/resources/queues/lp", "").want(http.StatusOK).decode(&q)
		return len(q.ConsumerGroups) == 1
	})
	s.push("lp", "", "wake", `{"hello":"world"}`)
	// Left alone the pop would answer 204 after its 20 s; woken, it
	// answers with the message well within 15 s.
	select {
	case r := <-done:
		var p popped
		r.want(http.StatusOK).decode(&p)
		if len(p.Messages) != 1 || p.Messages[0].TransactionID != "wake" {
			t.Fatalf("popped %+v", p.Messages)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("waiting pop not woken by push")
	}
}

func TestPopWaitEndsWhenClientGoesAway(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.configure("lp", `{}`)
	ctx, cancel := context.WithCancel(s.ctx)
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/api/v1/pop/queue/lp?wait=true&timeout=60000&consumerGroup=gone", nil)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		errc <- err
	}()
	waitFor(t, func() bool {
		var q queueInfo
		s.call("GET", "/api/v1/resources/queues/lp", "").want(http.StatusOK).decode(&q)
		return len(q.ConsumerGroups) == 1
	})
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("canceled request succeeded")
	}
	// The server ended the wait: the log says so, and nothing was leased.
	waitFor(t, func() bool { return contains(s.logs.String(), "request canceled") })
	s.push("lp", "", "after", `1`)
	if p := s.pop("lp", "consumerGroup=gone"); p.Messages[0].TransactionID != "after" {
		t.Fatalf("popped %+v", p.Messages)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
