package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// P4: a burst of failures. One /ack/batch sends p4Letters messages to
// the dead letters; its time on PostgreSQL (3 server children on one
// database, the ack on the first) vs on SQLite (one server child),
// interleaved; and, on PostgreSQL, how long a one-message push on
// another child waits while the ack files (pushes sent one after the
// other through the ack, the longest taken). PostgreSQL runs with
// fsync, synchronous_commit and full_page_writes on for the case
// (durableCluster), Lazarus at FULL on both stores.

const p4Letters = 1000

// p4Ack is an acknowledgement with the error it files.
type p4Ack struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId"`
	Status        string `json:"status"`
	Error         string `json:"error"`
}

func caseP4(ctx context.Context, e *env) ([]Row, error) {
	load0 := loadAverage()
	set, restore, err := durableCluster("P4")
	if err != nil {
		return nil, err
	}
	defer restore()
	var times Samples
	waits := Samples{}
	sqlite := variant{"SQLite", func(ctx context.Context, _ int) (float64, error) {
		path := e.path("p4")
		defer removeDB(path)
		c, srv, err := startServerChild(ctx, db.SyncFull, path, false)
		if err != nil {
			return 0, err
		}
		defer func() { srv.client.CloseIdleConnections(); c.stop() }()
		took, _, err := burstAck(ctx, srv, nil)
		return took.Seconds() * 1e3, err
	}}
	pg := variant{"PostgreSQL", func(ctx context.Context, _ int) (float64, error) {
		u, drop, err := pgDatabase()
		if err != nil {
			return 0, err
		}
		defer drop()
		srvs := make([]*server, 0, p2Processes)
		for range p2Processes {
			c, srv, err := startServerChild(ctx, db.SyncFull, u, false)
			if err != nil {
				return 0, err
			}
			defer func() { srv.client.CloseIdleConnections(); c.stop() }()
			srvs = append(srvs, srv)
		}
		took, wait, err := burstAck(ctx, srvs[0], srvs[1])
		waits["ours"] = append(waits["ours"], wait.Seconds()*1e3)
		return took.Seconds() * 1e3, err
	}}
	if times, err = interleave(ctx, e, e.reps, sqlite, pg); err != nil {
		return nil, err
	}
	p4 := compare(times, "P4", fmt.Sprintf("PostgreSQL (%d processes) vs SQLite: one /ack/batch filing %d dead letters, its time", p2Processes, p4Letters), "ms", "PostgreSQL", "SQLite")
	p4.Must, p4.Goal = atMost("ratio", 2, "≤ 2×"), atMost("ratio", 1.2, "≤ 1.2×")
	p4.Note = fmt.Sprintf("the ack's HTTP call, sent once its %d messages are leased; Lazarus at FULL; load average %s → %s on %d cores; %s",
		p4Letters, loadText(load0), loadText(loadAverage()), runtime.NumCPU(), pgDurableNote(true, set))
	w := single(waits, "P4", "  a one-message push on another process during that ack, its longest wait", "ms", "ours")
	w.Must, w.Goal = atMost("ours", 100, "≤ 100 ms"), atMost("ours", 20, "≤ 20 ms")
	w.Note = "pushes to another queue sent one after the other on the second process from just before the ack is sent until it answers; the longest push's HTTP time"
	return []Row{p4, w}, nil
}

// durableCluster turns the throwaway cluster's fsync and
// full_page_writes on for a case (pgDurable) and returns whether it did
// (false: a server of LAZARUS_TEST_POSTGRES, left at its own settings)
// and what turns them off again, the other cases' default.
func durableCluster(name string) (bool, func(), error) {
	set, err := pgDurable(true)
	if err != nil {
		return false, nil, fmt.Errorf("PostgreSQL: durability on: %w", err)
	}
	return set, func() {
		if _, err := pgDurable(false); err != nil {
			fmt.Printf("bench: %s: durability off again: %v\n", name, err)
		}
	}, nil
}

// burstAck pushes p4Letters messages to a partition through srv, pops
// them in one lease and sends them all to the dead letters in one
// /ack/batch, which it times. With other set, it pushes one message at a
// time through other from just before the ack is sent until it has
// answered, and returns the longest push's time too.
func burstAck(ctx context.Context, srv, other *server) (took, longest time.Duration, err error) {
	queue := "burst"
	items := make([]apiPushItem, 0, 100)
	for i := 0; i < p4Letters; i += cap(items) {
		items = items[:0]
		for j := range cap(items) {
			items = append(items, apiPushItem{Queue: queue, Partition: "p", Payload: payload(i+j, 0)})
		}
		if _, err := srv.api(ctx, http.MethodPost, "/api/v1/push", map[string]any{"items": items}, nil); err != nil {
			return 0, 0, err
		}
	}
	var pop apiPop
	if _, err := srv.api(ctx, http.MethodGet, fmt.Sprintf("/api/v1/pop/queue/%s?batch=%d", queue, p4Letters), nil, &pop); err != nil {
		return 0, 0, err
	}
	if len(pop.Messages) != p4Letters || pop.LeaseID == nil {
		return 0, 0, fmt.Errorf("popped %d of %d", len(pop.Messages), p4Letters)
	}
	acks := make([]p4Ack, len(pop.Messages))
	for i, m := range pop.Messages {
		acks[i] = p4Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: *pop.LeaseID, Status: broker.AckDLQ,
			Error: fmt.Sprintf("upstream 503 from inventory-%d", i%3)}
	}
	pushed := make(chan error, 1)
	done := make(chan struct{})
	if other != nil {
		// Warm: the other process's queue made and its connection open.
		if _, err := other.api(ctx, http.MethodPost, "/api/v1/push", map[string]any{"items": []apiPushItem{{Queue: "beside", Payload: payload(0, 0)}}}, nil); err != nil {
			return 0, 0, err
		}
		started := make(chan struct{})
		go func() {
			first := true
			for {
				t0 := time.Now()
				_, err := other.api(ctx, http.MethodPost, "/api/v1/push", map[string]any{"items": []apiPushItem{{Queue: "beside", Payload: payload(1, 0)}}}, nil)
				longest = max(longest, time.Since(t0))
				if first {
					close(started)
					first = false
				}
				if err != nil {
					pushed <- err
					return
				}
				select {
				case <-done:
					pushed <- nil
					return
				default:
				}
			}
		}()
		<-started
	}
	var res []apiAckResult
	t0 := time.Now()
	_, err = srv.api(ctx, http.MethodPost, "/api/v1/ack/batch", map[string]any{"acknowledgments": acks}, &res)
	took = time.Since(t0)
	close(done)
	if other != nil {
		err = errors.Join(err, <-pushed)
	}
	if err != nil {
		return 0, 0, err
	}
	for _, r := range res {
		if !r.Success {
			return 0, 0, fmt.Errorf("ack refused: %v", r.Error)
		}
	}
	if len(res) != p4Letters {
		return 0, 0, fmt.Errorf("%d ack results, want %d", len(res), p4Letters)
	}
	return took, longest, nil
}
