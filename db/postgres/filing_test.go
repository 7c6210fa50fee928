package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// An ack that files dead letters sends them in a few statements: its
// round trips and statements do not grow with how many it files, as a
// process among others (its write marked Concurrent) and as one alone.

// leaseN pushes n messages to partition part of queue through br and
// pops them all for group g under one lease.
func leaseN(t *testing.T, br *broker.Broker, queue, part string, n int) broker.PopResult {
	t.Helper()
	ctx := context.Background()
	items := make([]broker.PushItem, n)
	for i := range items {
		items[i] = broker.PushItem{Queue: queue, Partition: part, Payload: []byte(fmt.Sprintf(`{"order":%d,"note":"word%d"}`, i, i))}
	}
	if _, err := br.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	res, err := br.Pop(ctx, broker.PopRequest{Queue: queue, Partition: part, Group: "g", Batch: n})
	if err != nil || len(res.Messages) != n {
		t.Fatalf("pop %d of %s/%s: got %d, %v", n, queue, part, len(res.Messages), err)
	}
	return res
}

// dlqAcks are acks that send each message of res to the dead letters,
// with errors of two error groups.
func dlqAcks(res broker.PopResult) []broker.Ack {
	acks := make([]broker.Ack, len(res.Messages))
	for i, m := range res.Messages {
		acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Group: "g",
			Status: broker.AckDLQ, Error: fmt.Sprintf("timeout talking to db%d", i%2), ConsumerVersion: "v1"}
	}
	return acks
}

// fileAndCount acks res's messages to the dead letters through br and
// returns the round trips and statements of d's writes meanwhile.
func fileAndCount(t *testing.T, d *Store, br *broker.Broker, res broker.PopResult) (trips, statements int64) {
	t.Helper()
	t0, s0 := d.Wire()
	out, err := br.AckBatch(context.Background(), "g", dlqAcks(res))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range out {
		if !r.Success || !r.DLQ {
			t.Fatalf("ack %d: %+v", i, r)
		}
	}
	t1, s1 := d.Wire()
	return t1 - t0, s1 - s0
}

func TestPGFilingDeadLettersTakesRoundTripsThatDoNotGrow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		among bool // a process among others: its acks are marked Concurrent
	}{{"AmongOthers", true}, {"Alone", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn := pgtest.Database(t, "db", Prepare)
			// No fold in what is counted: one comes due each second, and under
			// load it fell in one filing and not the other (4 round trips more).
			d, err := OpenWith(ctx, dsn, Options{Sync: SyncNormal, NeverAlone: tc.among, FoldEvery: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			br := broker.New(broker.Config{Store: d})
			t.Cleanup(br.Close)
			const few, many = 4, 400
			// The queues exist and are warm before either is measured.
			smallRes, bigRes := leaseN(t, br, "small", "p", few), leaseN(t, br, "big", "p", many)
			smallTrips, smallStatements := fileAndCount(t, d, br, smallRes)
			bigTrips, bigStatements := fileAndCount(t, d, br, bigRes)
			t.Logf("filing %d dead letters: %d round trips, %d statements; %d: %d round trips, %d statements",
				few, smallTrips, smallStatements, many, bigTrips, bigStatements)
			if bigTrips > smallTrips || bigStatements > smallStatements {
				t.Errorf("filing %d dead letters took %d round trips (%d statements), %d took %d (%d): they grow with the dead letters",
					many, bigTrips, bigStatements, few, smallTrips, smallStatements)
			}
			// Each was filed, indexed and counted.
			for _, c := range []struct {
				queue string
				n     int
			}{{"small", few}, {"big", many}} {
				page, err := br.DeadLetters(ctx, broker.DLQQuery{Queue: c.queue, WithTotal: true, Limit: 1})
				if err != nil {
					t.Fatal(err)
				}
				found, err := br.DeadLetters(ctx, broker.DLQQuery{Queue: c.queue, Text: fmt.Sprintf("word%d", c.n-1), WithTotal: true})
				if err != nil {
					t.Fatal(err)
				}
				groups, err := br.ErrorGroups(ctx, c.queue, "g", "", 10)
				if err != nil {
					t.Fatal(err)
				}
				var inGroups int64
				for _, g := range groups {
					inGroups += g.DeadLetters
				}
				if page.Total != int64(c.n) || found.Total != 1 || len(groups) != 2 || inGroups != int64(c.n) {
					t.Errorf("%s: %d dead letters, %d found by the last payload's word, %d error groups of %d: want %d, 1, 2 of %d",
						c.queue, page.Total, found.Total, len(groups), inGroups, c.n, c.n)
				}
			}
		})
	}
}

// holdingStore is a store whose writes can be held open once their
// function has run, with its locks held, until released: a filing ack
// kept in flight while another process writes.
type holdingStore struct {
	*Store
	mu      sync.Mutex
	hold    chan struct{} // closed: release
	reached chan struct{} // closed once a write is held
}

// holdNext makes the next write that succeeds wait, open, for release.
func (h *holdingStore) holdNext() (reached <-chan struct{}, release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hold := make(chan struct{})
	h.hold, h.reached = hold, make(chan struct{})
	return h.reached, sync.OnceFunc(func() { close(hold) })
}

func (h *holdingStore) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	return h.Store.Update(ctx, o, func(tx broker.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		h.mu.Lock()
		hold, reached := h.hold, h.reached
		h.hold, h.reached = nil, nil
		h.mu.Unlock()
		if hold != nil {
			close(reached)
			<-hold
		}
		return nil
	})
}

// While one process's ack has filed many dead letters and not yet
// committed, another process pushes to the same queue and partition,
// pops and acks, and files a dead letter of its own once the first
// has committed: the filing holds no lock a push, a pop or an ack
// needs, and the second filing waits for the first (dead letter ids
// commit in their order).
func TestPGAFilingAckBlocksNoPushOfAnotherProcess(t *testing.T) {
	ctx := context.Background()
	a, b, _, _, _, _ := concurrentSetup(t, Options{Sync: SyncNormal})
	ha := &holdingStore{Store: a}
	brA := broker.New(broker.Config{Store: ha})
	t.Cleanup(brA.Close)
	brB := broker.New(broker.Config{Store: b})
	t.Cleanup(brB.Close)
	res := leaseN(t, brA, "burst", "p", 300)
	// The second filing's queue is made before (a new queue is made by
	// a write that runs alone).
	late := leaseN(t, brB, "burst2", "p", 2)
	reached, release := ha.holdNext()
	t.Cleanup(release)
	filed := make(chan error, 1)
	go func() {
		_, err := brA.AckBatch(ctx, "g", dlqAcks(res))
		filed <- err
	}()
	select {
	case <-reached:
	case err := <-filed:
		t.Fatalf("the filing ack ended before it was held: %v", err)
	}
	// Another process's push to the same partition, a pop of it and an
	// ack commit while the filing is held.
	pushed := make(chan error, 1)
	go func() {
		r, err := brB.Push(ctx, []broker.PushItem{{Queue: "burst", Partition: "p", Payload: []byte(`{"late":1}`)}})
		if err == nil && (len(r) != 1 || r[0].Status != broker.StatusQueued) {
			err = fmt.Errorf("push: %+v", r)
		}
		if err == nil {
			err = popAndComplete(ctx, brB, "q", "p1")
		}
		pushed <- err
	}()
	select {
	case err := <-pushed:
		if err != nil {
			t.Fatal(err)
		}
	case <-lockWaited(t, a, "advisory", "tuple", "transactionid", "relation"):
		t.Fatal("a push or pop of another process waited for a lock while an ack filed dead letters")
	}
	// A second filing, on the other process, waits for the first.
	second := make(chan error, 1)
	go func() {
		out, err := brB.AckBatch(ctx, "g", dlqAcks(late))
		for i, r := range out {
			if err == nil && (!r.Success || !r.DLQ) {
				err = fmt.Errorf("ack %d of the second filing: %+v", i, r)
			}
		}
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("the second filing ended beside the first: %v", err)
	case <-lockWaited(t, a, "advisory"):
	}
	release()
	if err := errors.Join(<-filed, <-second); err != nil {
		t.Fatal(err)
	}
	// The second's dead letters have the higher ids.
	var firstMax, secondMin int64
	if err := a.QueryRowUncatalogued(ctx, `SELECT (SELECT MAX(d.id) FROM dead_letters d JOIN queues q ON q.id = d.queue_id WHERE q.name = 'burst'),
		(SELECT MIN(d.id) FROM dead_letters d JOIN queues q ON q.id = d.queue_id WHERE q.name = 'burst2')`).Scan(&firstMax, &secondMin); err != nil {
		t.Fatal(err)
	}
	if secondMin <= firstMax {
		t.Errorf("the filing that committed second has id %d, the first up to %d: ids must commit in order", secondMin, firstMax)
	}
}

// A process that counted itself alone, and counts again only in an hour,
// learns that another has joined from the newcomer itself: its next
// write, an ack filing dead letters, runs beside the newcomer's (the
// writer's lock shared), and a push of the newcomer commits while the
// filing is held open, waiting for no lock (P4 in
// docs/performance.md: until the first process counted again, the push
// waited for the whole ack).
func TestPGAProcessThatJoinsWaitsForNoFilingOfOneThatWasAlone(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t, "db", Prepare)
	open := func(countEvery time.Duration) *Store {
		d, err := openPostgres(ctx, dsn, Options{Sync: SyncNormal}, countEvery)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("never %s", what)
			}
			time.Sleep(10 * time.Millisecond) // polling a condition
		}
	}
	a := open(time.Hour)
	until("counted alone", a.alone.Load)
	ha := &holdingStore{Store: a}
	brA := broker.New(broker.Config{Store: ha})
	t.Cleanup(brA.Close)
	res := leaseN(t, brA, "burst", "p", 300)
	// The push's queue is made before (a new queue is made by a write
	// that runs alone).
	if _, err := brA.Push(ctx, []broker.PushItem{{Queue: "beside", Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	b := open(memberEvery)
	brB := broker.New(broker.Config{Store: b})
	t.Cleanup(brB.Close)
	until("told that another process joined (the first process counts again only in an hour)", a.ConcurrentWrites)
	reached, release := ha.holdNext()
	t.Cleanup(release)
	filed := make(chan error, 1)
	go func() {
		_, err := brA.AckBatch(ctx, "g", dlqAcks(res))
		filed <- err
	}()
	select {
	case <-reached:
	case err := <-filed:
		t.Fatalf("the filing ack ended before it was held: %v", err)
	}
	pushed := make(chan error, 1)
	go func() {
		r, err := brB.Push(ctx, []broker.PushItem{{Queue: "beside", Payload: []byte(`{"late":1}`)}})
		if err == nil && (len(r) != 1 || r[0].Status != broker.StatusQueued) {
			err = fmt.Errorf("push: %+v", r)
		}
		pushed <- err
	}()
	select {
	case err := <-pushed:
		if err != nil {
			t.Fatal(err)
		}
	case <-lockWaited(t, a, "advisory", "tuple", "transactionid", "relation"):
		t.Fatal("a push of the process that joined waited for a lock while the first process's ack filed dead letters")
	}
	release()
	if err := <-filed; err != nil {
		t.Fatal(err)
	}
}

// popAndComplete pops one message of queue's partition part for group
// g through br and acknowledges it completed.
func popAndComplete(ctx context.Context, br *broker.Broker, queue, part string) error {
	res, err := br.Pop(ctx, broker.PopRequest{Queue: queue, Partition: part, Group: "g"})
	if err != nil {
		return err
	}
	if len(res.Messages) != 1 {
		return fmt.Errorf("pop %s/%s: %d messages", queue, part, len(res.Messages))
	}
	_, err = br.Ack(ctx, broker.Ack{TransactionID: res.Messages[0].TransactionID, LeaseID: res.LeaseID, Status: broker.AckCompleted, Group: "g"})
	return err
}

// lockWaited is closed once a backend of d's database waits for a lock
// of one of the kinds events names (waitForLock's; polled; never, when
// none does before the test ends). It polls on a connection of its own:
// the store's may all be taken by the writes it watches.
func lockWaited(t *testing.T, d *Store, events ...string) <-chan struct{} {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), d.Path())
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{})
	stop, stopped := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		<-stopped
		conn.Close(context.Background())
	})
	go func() {
		defer close(stopped)
		for {
			var n int
			err := conn.QueryRow(context.Background(), `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()
				AND wait_event_type = 'Lock' AND wait_event = ANY($1::text[])`, events).Scan(&n)
			if err != nil {
				t.Errorf("look for a lock waited for: %v", err)
				return
			}
			if n > 0 {
				close(ch)
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond): // polling a condition
			}
		}
	}()
	return ch
}
