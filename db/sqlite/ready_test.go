package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// openBroker opens a database in a temporary directory and a broker
// over it, closed at the end of the test.
func openBroker(t *testing.T) (*Store, *broker.Broker) {
	t.Helper()
	d := openTestStore(t)
	return d, broker.New(broker.Config{Store: d})
}

// openBrokerAt is openBroker with a clock that reads *at: it stands
// still until the test moves it (the broker runs nothing of its own in
// the background: no Run).
func openBrokerAt(t *testing.T, at *time.Time) (*Store, *broker.Broker) {
	t.Helper()
	d := openTestStore(t)
	return d, broker.New(broker.Config{Store: d, Clock: broker.ClockFunc(func() time.Time { return *at })})
}

// openTestStore opens a database in a temporary directory, closed at the
// end of the test.
func openTestStore(t *testing.T) *Store {
	t.Helper()
	d, err := Open(context.Background(), filepath.Join(t.TempDir(), "l.db"), SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// holdWriter keeps the writer busy until release is called, so that the
// Updates sent meanwhile queue up and commit together as one group. The
// holding write is a background one, which takes no late joiners
// (commitGroup): the group is theirs alone.
func holdWriter(d *Store) (release func()) {
	hold, held := make(chan struct{}), make(chan struct{})
	go d.Update(context.Background(), broker.UpdateOptions{Background: true}, func(broker.Tx) error { close(held); <-hold; return nil })
	<-held
	return func() { close(hold) }
}

// waitQueued waits until n Updates wait for the writer.
func waitQueued(d *Store, n int) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	for len(d.waiting) < n {
		d.changed.Wait()
	}
}

// reapply takes the schema back to before migration version (undo), and
// applies the migration again.
func reapply(t *testing.T, d *Store, version int, file string, undo ...string) {
	t.Helper()
	ctx := context.Background()
	undo = append(undo, fmt.Sprintf("DELETE FROM schema_migrations WHERE version = %d", version))
	for _, stmt := range undo {
		if _, err := d.WriteDB().ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	body, err := migrations.ReadFile("migrations/" + file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.applyMigration(ctx, version, file, string(body)); err != nil {
		t.Fatal(err)
	}
}

// partitionP is partition p of queue q, which the tests push to.
func partitionP(ctx context.Context, tx broker.Tx) (broker.Partition, error) {
	q, err := tx.QueueByName(ctx, "q")
	if err != nil {
		return broker.Partition{}, err
	}
	return tx.PartitionByName(ctx, q.ID, "p")
}

// readyOf returns, partition by partition, whether the group's consumer
// in queue q is marked ready (migration 0009).
func readyOf(t *testing.T, d *Store, group string) map[string]bool {
	t.Helper()
	return queryMap[bool](t, d, `SELECT p.name, c.ready FROM consumers c
		JOIN partitions p ON p.id = c.partition_id JOIN groups g ON g.id = c.group_id WHERE g.name = ?`, group)
}

// queryMap runs a query of (name, value) rows and returns them as a map.
func queryMap[V any](t *testing.T, d *Store, query string, args ...any) map[string]V {
	t.Helper()
	rows, err := d.WriteDB().QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]V{}
	for rows.Next() {
		var name string
		var v V
		if err := rows.Scan(&name, &v); err != nil {
			t.Fatal(err)
		}
		out[name] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantReady(t *testing.T, d *Store, group string, want map[string]bool) {
	t.Helper()
	got := readyOf(t, d, group)
	for p, w := range want {
		if r, ok := got[p]; !ok {
			t.Errorf("group %s, partition %s: no consumer (all: %v)", group, p, got)
		} else if r != w {
			t.Errorf("group %s, partition %s: ready = %v, want %v (all: %v)", group, p, got[p], w, got)
		}
	}
}

func push(t *testing.T, b *broker.Broker, partition, txid string) {
	t.Helper()
	if _, err := b.Push(context.Background(), []broker.PushItem{{Queue: "q", Partition: partition, TransactionID: txid, Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
}

// popAck pops for group from any partition and acks what it got with
// status; it returns the partition and the transactionIds.
func popAck(t *testing.T, b *broker.Broker, group string, status string) (string, []string) {
	t.Helper()
	ctx := context.Background()
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: group, Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range res.Messages {
		ids = append(ids, m.TransactionID)
		if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: status, Error: "boom", Group: group}); err != nil {
			t.Fatal(err)
		}
	}
	if len(res.Messages) == 0 {
		return "", nil
	}
	return res.Messages[0].Partition, ids
}

// A consumer is never unready while messages wait past its cursor: a
// push, a replay or a new group from the beginning mark it, and a group
// starting now is not marked. A pop clears the drained ones it looks at.
func TestConsumersAreReadyWhileMessagesWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	for _, p := range []string{"a", "b", "c"} {
		push(t, b, p, p+"1")
		push(t, b, p, p+"2")
	}
	for range 3 {
		if p, ids := popAck(t, b, "g", broker.AckCompleted); len(ids) != 2 {
			t.Fatalf("pop got %v from %q, want a partition's two messages", ids, p)
		}
	}
	// A pop that finds nothing has looked at every ready consumer.
	if p, ids := popAck(t, b, "g", broker.AckCompleted); len(ids) != 0 {
		t.Fatalf("pop got %v from %q, want nothing", ids, p)
	}
	wantReady(t, d, "g", map[string]bool{"a": false, "b": false, "c": false})

	push(t, b, "b", "b3")
	wantReady(t, d, "g", map[string]bool{"a": false, "b": true, "c": false})
	if p, ids := popAck(t, b, "g", broker.AckCompleted); p != "b" || len(ids) != 1 || ids[0] != "b3" {
		t.Fatalf("pop after the push got %v from %q, want b3 from b", ids, p)
	}

	// Groups new to the queue: from now on, nothing waits for them; from
	// the beginning, everything does.
	if res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "late", Start: broker.Start{Now: true}}); err != nil || len(res.Messages) != 0 {
		t.Fatalf("pop of a group starting now = %+v, %v; want nothing", res, err)
	}
	wantReady(t, d, "late", map[string]bool{"a": false, "b": false, "c": false})
	if res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "early", Start: broker.Start{From: time.Unix(0, 0)}, Batch: 10}); err != nil || len(res.Messages) == 0 {
		t.Fatalf("pop of a group from the beginning = %+v, %v; want messages", res, err)
	}
	wantReady(t, d, "early", map[string]bool{"a": true, "b": true, "c": true})

	// A dead letter replayed into a drained partition marks it, and the
	// copy is served.
	push(t, b, "c", "c3")
	if p, ids := popAck(t, b, "g", broker.AckDLQ); p != "c" || len(ids) != 1 {
		t.Fatalf("pop got %v from %q, want c3 from c", ids, p)
	}
	if p, ids := popAck(t, b, "g", broker.AckCompleted); len(ids) != 0 {
		t.Fatalf("pop got %v from %q, want nothing", ids, p)
	}
	wantReady(t, d, "g", map[string]bool{"a": false, "b": false, "c": false})
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Group: "g"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("dead letters = %+v, %v; want c3's", page, err)
	}
	if _, err := b.Replay(ctx, page.Items[0].MessageID(), "test"); err != nil {
		t.Fatal(err)
	}
	wantReady(t, d, "g", map[string]bool{"a": false, "b": false, "c": true})
	if p, ids := popAck(t, b, "g", broker.AckCompleted); p != "c" || len(ids) != 1 || ids[0] != broker.ReplayPrefix+page.Items[0].MessageID() {
		t.Fatalf("pop after the replay got %v from %q, want the copy of c3", ids, p)
	}
}

// A pop behind many drained partitions (leased before the one with
// messages) is served, and clears them on the way, so that the next
// pops do not look at them again.
func TestPopClearsTheDrainedPartitionsItPasses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	const parts = 3*sqlcore.ReadyScan + 5
	var items []broker.PushItem
	for i := range parts {
		items = append(items, broker.PushItem{Queue: "q", Partition: fmt.Sprintf("p%03d", i), Payload: []byte(`{}`)})
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	var last string
	for range parts {
		p, ids := popAck(t, b, "g", broker.AckCompleted)
		if len(ids) != 1 {
			t.Fatalf("pop got %v, want one message", ids)
		}
		last = p
	}
	// The partition leased last gets a message: every other one comes
	// before it in the pop's order, drained but still marked.
	push(t, b, last, "again")
	if p, ids := popAck(t, b, "g", broker.AckCompleted); p != last || len(ids) != 1 || ids[0] != "again" {
		t.Fatalf("pop got %v from %q, want again from %s", ids, p, last)
	}
	for p, ready := range readyOf(t, d, "g") {
		if ready && p != last {
			t.Errorf("partition %s: still ready after a pop passed it drained", p)
		}
	}
}

// In a group commit, a push to a drained partition that is rolled back
// to its savepoint leaves the transaction's note of the partition in
// place: another push of the group to the same partition, before or
// after it, still leaves the consumer ready, and its message is served.
func TestPushAfterARolledBackPushLeavesTheConsumerReady(t *testing.T) {
	t.Parallel()
	for _, failFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("failing push first %v", failFirst), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d, b := openBroker(t)
			push(t, b, "p", "m1")
			if _, ids := popAck(t, b, "g", broker.AckCompleted); len(ids) != 1 {
				t.Fatalf("pop got %v, want m1", ids)
			}
			if _, ids := popAck(t, b, "g", broker.AckCompleted); len(ids) != 0 {
				t.Fatalf("pop got %v, want nothing", ids)
			}
			wantReady(t, d, "g", map[string]bool{"p": false})
			var partitionID int64
			if err := d.View(ctx, func(tx broker.Tx) error {
				p, err := partitionP(ctx, tx)
				partitionID = p.ID
				return err
			}); err != nil {
				t.Fatal(err)
			}
			boom := errors.New("boom")
			insert := func(txid string, fail error) func(broker.Tx) error {
				return func(tx broker.Tx) error {
					m := broker.Message{PartitionID: partitionID, TransactionID: txid, Payload: []byte(`{}`), CreatedAt: time.Now()}
					if _, err := tx.InsertMessage(ctx, &m); err != nil {
						return err
					}
					return fail
				}
			}
			writes := []func(broker.Tx) error{insert("m2", nil), insert("rolled-back", boom)}
			if failFirst {
				writes[0], writes[1] = writes[1], writes[0]
			}
			// Hold the writer so that the two pushes queue up and share a
			// transaction, in that order.
			release := holdWriter(d)
			errs := make(chan error, 2)
			for i, w := range writes {
				go func() { errs <- d.Update(ctx, broker.UpdateOptions{}, w) }()
				waitQueued(d, i+1)
			}
			release()
			var failed int
			for range 2 {
				if err := <-errs; errors.Is(err, boom) {
					failed++
				} else if err != nil {
					t.Fatal(err)
				}
			}
			if failed != 1 {
				t.Fatalf("%d writes failed, want one", failed)
			}
			wantReady(t, d, "g", map[string]bool{"p": true})
			if p, ids := popAck(t, b, "g", broker.AckCompleted); p != "p" || len(ids) != 1 || ids[0] != "m2" {
				t.Fatalf("pop got %v from %q, want m2 from p", ids, p)
			}
		})
	}
}

// ReadyConsumers asked for several returns each waiting consumer once,
// least recently leased first, however many drained ones lie between
// them and however many scans that takes.
func TestReadyConsumersReturnsEachWaitingOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := openBroker(t)
	clk := newManualClock()
	b := broker.New(broker.Config{Store: d, Clock: clk})
	const parts = 40
	var items []broker.PushItem
	for i := range parts {
		items = append(items, broker.PushItem{Queue: "q", Partition: fmt.Sprintf("p%02d", i), Payload: []byte(`{}`)})
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	// Drain each partition by a pop that names it (which leaves its mark
	// on), in order, so that they were leased in that order; every fourth
	// gets a message again.
	var waiting []string
	for i := range parts {
		p := fmt.Sprintf("p%02d", i)
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Partition: p, Group: "g"})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop %s = %+v, %v", p, res, err)
		}
		m := res.Messages[0]
		if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted, Group: "g"}); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			push(t, b, p, p+"-again")
			waiting = append(waiting, p)
		}
		clk.Advance(2 * time.Millisecond) // distinct lease times
	}
	ready := func(limit int) []string {
		t.Helper()
		var names []string
		if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
			q, err := tx.QueueByName(ctx, "q")
			if err != nil {
				return err
			}
			gid, err := tx.GroupID(ctx, "g", false)
			if err != nil {
				return err
			}
			cs, _, err := tx.ReadyConsumers(ctx, q.ID, gid, time.Now(), limit)
			for _, c := range cs {
				p, err := tx.PartitionByID(ctx, c.PartitionID)
				if err != nil {
					return err
				}
				names = append(names, p.Name)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return names
	}
	if got, want := fmt.Sprint(ready(3)), fmt.Sprint(waiting[:3]); got != want {
		t.Fatalf("ReadyConsumers(3) = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(ready(parts)), fmt.Sprint(waiting); got != want {
		t.Fatalf("ReadyConsumers(%d) = %s, want %s", parts, got, want)
	}
	for p, r := range readyOf(t, d, "g") {
		if r != slices.Contains(waiting, p) {
			t.Errorf("partition %s: ready = %v after the scan", p, r)
		}
	}
}

// A replay whose transaction fails after PushCopies made its temporary
// table (which the rollback takes away again) leaves the next replay
// working, and the copies of each in the order asked.
func TestReplayAfterARolledBackReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	push(t, b, "p", "m1")
	if _, ids := popAck(t, b, "g", broker.AckDLQ); len(ids) != 1 {
		t.Fatalf("pop got %v, want m1", ids)
	}
	push(t, b, "p", "m2")
	push(t, b, "p", "m3")
	boom := errors.New("boom")
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		p, err := partitionP(ctx, tx)
		if err != nil {
			return err
		}
		first, err := tx.MessagesAfter(ctx, p.ID, 0, 1)
		if err != nil || len(first) != 1 {
			return fmt.Errorf("messages: %v, %v", first, err)
		}
		cs := []broker.Copy{{Seq: first[0].Seq, PartitionID: p.ID, TransactionID: "copy-then-rollback"}}
		if err := tx.PushCopies(ctx, cs, time.Now(), broker.ReplayBy{Actor: "test"}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("update = %v, want boom", err)
	}
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Group: "g"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("dead letters = %+v, %v", page, err)
	}
	res, err := b.ReplayIDs(ctx, []string{page.Items[0].MessageID()}, "test")
	if err != nil || res.Done != 1 {
		t.Fatalf("replay = %+v, %v; want one done", res, err)
	}
	// m2, m3, then the copy of m1; the rolled-back copy is nowhere.
	var got []string
	for {
		_, ids := popAck(t, b, "g", broker.AckCompleted)
		if len(ids) == 0 {
			break
		}
		got = append(got, ids...)
	}
	if want := fmt.Sprint([]string{"m2", "m3", broker.ReplayPrefix + page.Items[0].MessageID()}); fmt.Sprint(got) != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
}
