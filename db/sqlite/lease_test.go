package sqlite

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Lease ids name their consumer (migration 0027): a pop's lease id holds
// its partition and group, an ack or extend by lease id alone finds it by
// the primary key, and the index kept for older lease ids is never
// written for new ones.
func TestLeaseIDsNameTheirConsumer(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	ctx := context.Background()
	push(t, b, "p", "a")
	push(t, b, "p", "b")
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1})
	if err != nil || len(res.Messages) != 1 {
		t.Fatal(res, err)
	}
	pid, gid, ok := broker.LeaseConsumer(res.LeaseID)
	var wantP, wantG int64
	if err := d.read.QueryRowContext(ctx, `SELECT partition_id, group_id FROM consumers WHERE lease_id = ?`, res.LeaseID).Scan(&wantP, &wantG); err != nil {
		t.Fatal(err)
	}
	if !ok || pid != wantP || gid != wantG {
		t.Fatalf("lease %s names (%d, %d, %v), the consumer is (%d, %d)", res.LeaseID, pid, gid, ok, wantP, wantG)
	}
	if _, err := b.ExtendLease(ctx, res.LeaseID, 120); err != nil {
		t.Fatalf("extend by lease id: %v", err)
	}
	// An ack naming the lease and not the partition finds it.
	if _, err := b.Ack(ctx, broker.Ack{TransactionID: "a", LeaseID: res.LeaseID, Group: "g", Status: broker.AckCompleted}); err != nil {
		t.Fatalf("ack by lease id: %v", err)
	}
	// That lease is over: the same id again is refused, and a later
	// lease of the same consumer is another id.
	if _, err := b.ExtendLease(ctx, res.LeaseID, 120); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("extend of a settled lease: %v, want not found", err)
	}
	next, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1})
	if err != nil || len(next.Messages) != 1 || next.LeaseID == res.LeaseID {
		t.Fatalf("second pop %+v %v (first lease %s)", next, err, res.LeaseID)
	}
	if _, err := b.Ack(ctx, broker.Ack{TransactionID: "b", LeaseID: res.LeaseID, Group: "g", Status: broker.AckCompleted}); err == nil {
		t.Fatal("an ack with the consumer's earlier lease id settled its later lease")
	}
	var indexed int
	if err := d.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM consumers INDEXED BY consumers_lease_v7 WHERE lease_id IS NOT NULL AND substr(lease_id, 15, 1) <> '8'`).Scan(&indexed); err != nil {
		t.Fatal(err)
	}
	if indexed != 0 {
		t.Errorf("%d new lease ids in the index of lease ids made before migration 0027", indexed)
	}
	// A lease id that only looks like one names nothing.
	for _, id := range []string{"", "not-a-lease", strings.Replace(next.LeaseID, next.LeaseID[30:], "000000000000", 1)} {
		if _, err := b.ExtendLease(ctx, id, 60); !errors.Is(err, broker.ErrNotFound) {
			t.Errorf("extend %q: %v, want not found", id, err)
		}
	}
}

// A lease made before migration 0027 (a UUIDv7, in the consumer's row)
// is still found by its id, through the index kept for those, until it
// ends.
func TestLeasesFromBeforeMigration0027AreStillFound(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	ctx := context.Background()
	push(t, b, "p", "a")
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1})
	if err != nil || len(res.Messages) != 1 {
		t.Fatal(res, err)
	}
	old := broker.NewUUID(time.Now())
	execSQL(t, d, `UPDATE consumers SET lease_id = ? WHERE lease_id = ?`, old, res.LeaseID)
	if plan := queryPlan(t, d, sqlcore.ConsumerByLeaseV7SQL, old); !strings.Contains(plan, "consumers_lease_v7") {
		t.Errorf("a lease id from before 0027 is looked up by:\n%s\nwant the index consumers_lease_v7", plan)
	}
	// As an upgrade finds it: the schema of 0026 (every lease id in one
	// unique index), a live v7 lease, then migration 0027.
	reapply(t, d, 27, "0027_lease_ids_name_consumers.sql", `DROP INDEX consumers_lease_v7`,
		`CREATE UNIQUE INDEX consumers_lease ON consumers (lease_id) WHERE lease_id IS NOT NULL`)
	if plan := queryPlan(t, d, sqlcore.ConsumerByLeaseV7SQL, old); !strings.Contains(plan, "consumers_lease_v7") {
		t.Errorf("after the upgrade a lease id from before 0027 is looked up by:\n%s", plan)
	}
	if _, err := b.ExtendLease(ctx, old, 120); err != nil {
		t.Fatalf("extend a lease from before 0027: %v", err)
	}
	if _, err := b.Ack(ctx, broker.Ack{TransactionID: "a", LeaseID: old, Group: "g", Status: broker.AckCompleted}); err != nil {
		t.Fatalf("ack by a lease id from before 0027: %v", err)
	}
}

// A consumer whose ids a lease id cannot hold gets lease ids of the
// older kind (a UUIDv7), found by the index kept for those: it can pop,
// extend and ack as any other.
func TestLeaseIDsPastTheirLimits(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	ctx := context.Background()
	push(t, b, "p", "a")
	if _, ids := popAck(t, b, "g", broker.AckRetry); len(ids) != 1 {
		t.Fatalf("first pop of g: %v", ids)
	}
	execSQL(t, d, `INSERT INTO groups (id, name) VALUES (?, 'huge')`, broker.MaxLeaseGroupID+1)
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "huge", Batch: 1})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("pop for group id %d: %+v %v", broker.MaxLeaseGroupID+1, res, err)
	}
	if _, _, ok := broker.LeaseConsumer(res.LeaseID); ok {
		t.Fatalf("lease %s names its consumer, whose group id a lease id cannot hold", res.LeaseID)
	}
	if _, err := b.ExtendLease(ctx, res.LeaseID, 60); err != nil {
		t.Fatalf("extend: %v", err)
	}
	if _, err := b.Ack(ctx, broker.Ack{TransactionID: "a", LeaseID: res.LeaseID, Group: "huge", Status: broker.AckCompleted}); err != nil {
		t.Fatalf("ack by lease id: %v", err)
	}
}

// The index of shared lease ids (migration 0030) holds exactly the ids
// broker.IsSharedLease says are shared: a pop of one partition, whatever
// its partition and group ids, writes nothing to it, and a pop of several
// one entry a partition, which the lookup reads.
func TestSharedLeaseIndexHoldsSharedLeasesOnly(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	ctx := context.Background()
	// The SQL marker and the Go one agree, on ids of the edges of the
	// layout: partition ids with the low 36 or 37 bits zero, the largest
	// ids, and groups whose low bits share the marker's character.
	var ids []string
	for _, p := range []int64{1, 2, 1 << 36, 1 << 37, 3 << 36, broker.MaxLeasePartitionID, 1<<36 - 1} {
		for _, g := range []int64{1, 2, 3, 4, 5, broker.MaxLeaseGroupID} {
			ids = append(ids, broker.NewLeaseID(p, g))
		}
	}
	for _, g := range []int64{0, 1, 2, 3, 4, 5, 7, broker.MaxLeaseGroupID, broker.MaxLeaseGroupID + 1} {
		ids = append(ids, broker.NewSharedLeaseID(g))
	}
	ids = append(ids, broker.NewUUID(time.Now()))
	for _, id := range ids {
		var inIndex bool
		if err := d.read.QueryRowContext(ctx, `SELECT substr(?1, 15, 1) = '8' AND substr(?1, 27, 1) IN ('0', '4', '8', 'c') AND substr(?1, 28, 9) = '000000000'`, id).Scan(&inIndex); err != nil {
			t.Fatal(err)
		}
		if inIndex != broker.IsSharedLease(id) {
			t.Errorf("lease id %s: in the index of shared leases %v, shared %v", id, inIndex, broker.IsSharedLease(id))
		}
	}
	indexed := func() int {
		t.Helper()
		var n int
		if err := d.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM consumers INDEXED BY consumers_lease_shared
			WHERE substr(lease_id, 15, 1) = '8' AND substr(lease_id, 27, 1) IN ('0', '4', '8', 'c') AND substr(lease_id, 28, 9) = '000000000'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, p := range []string{"p1", "p2", "p3"} {
		push(t, b, p, p+"-a")
		push(t, b, p, p+"-b")
	}
	for range 3 {
		if res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "one", Batch: 1}); err != nil || len(res.Messages) != 1 {
			t.Fatal(res, err)
		}
	}
	if n := indexed(); n != 0 {
		t.Fatalf("%d entries in the index of shared leases after pops of one partition", n)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "many", Batch: 100, Partitions: 3})
	if err != nil || len(res.Messages) != 6 {
		t.Fatal(res, err)
	}
	if n := indexed(); n != 3 {
		t.Fatalf("%d entries in the index of shared leases after a pop of 3 partitions, want 3", n)
	}
	if plan := queryPlan(t, d, sqlcore.ConsumersBySharedLeaseSQL, res.LeaseID); !strings.Contains(plan, "consumers_lease_shared") {
		t.Errorf("a shared lease is looked up by:\n%s\nwant the index consumers_lease_shared", plan)
	}
	for _, m := range res.Messages {
		if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, LeaseID: res.LeaseID, Group: "many", Status: broker.AckCompleted}); err != nil {
			t.Fatalf("ack %s: %v", m.TransactionID, err)
		}
	}
	if n := indexed(); n != 0 {
		t.Fatalf("%d entries in the index of shared leases once every partition was settled", n)
	}
}
