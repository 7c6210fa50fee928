package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// The sweep of empty partitions reads its candidates from the partial
// index partitions_empty and checks each one, in the snapshot's read as
// in the delete, with an index probe a table: none scans messages, dead
// letters, their records, replays or consumers.
func TestPartitionSweepPlans(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	probes := []string{
		"SEARCH m USING COVERING INDEX messages_partition_seq (partition_id=?)",
		"SEARCH d USING COVERING INDEX dead_letters_partition (partition_id=?)",
		"SEARCH r USING COVERING INDEX removed_dead_letters_partition (partition_id=?)",
		"SEARCH c USING COVERING INDEX replays_partition (partition_id=?)",
		"SEARCH c USING PRIMARY KEY (partition_id=?)",
	}
	for _, c := range []struct {
		name, query string
		args        []any
		want        []string
	}{
		{"candidates", sqlcore.EmptyPartitionsSQL, []any{0, 1, 1, 500}, append([]string{"SEARCH partitions USING INDEX partitions_empty (id>?)"}, probes...)},
		{"delete", sqlcore.DeleteEmptyPartitionsSQL, []any{"[1]", 1, 1}, append([]string{"SEARCH partitions USING INTEGER PRIMARY KEY (rowid=?)"}, probes...)},
		{"consumers", sqlcore.DeletePartitionConsumersSQL, []any{"[1]"}, []string{"SEARCH consumers USING PRIMARY KEY (partition_id=?)"}},
		{"marks", sqlcore.DeletePartitionMarksSQL, []any{"[1]"}, []string{"SEARCH settle_marks USING PRIMARY KEY (partition_id=?)"}},
	} {
		plan := queryPlan(t, d, c.query, c.args...)
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan\n%s\nwants %q", c.name, plan, w)
			}
		}
		for _, bad := range []string{"SCAN partitions", "SCAN messages", "SCAN m\n", "SCAN dead_letters", "SCAN d\n", "SCAN removed_dead_letters", "SCAN r\n", "SCAN replays", "SCAN consumers", "SCAN c\n", "SCAN settle_marks"} {
			if strings.Contains(plan+"\n", bad) {
				t.Errorf("%s: plan\n%s\nhas %q", c.name, plan, strings.TrimSpace(bad))
			}
		}
	}
}

// A partition deleted while the db still has it (and its consumers)
// noted to fold does not break the fold: the fold's updates match no row
// for it, and the partition that gets its id again (SQLite gives the
// highest rowid + 1 again) is counted from its own rows.
func TestDeletedPartitionLeavesTheFoldRight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openFolding(t, time.Hour) // nothing folds until the test says so
	push(t, b, "r", "r1")
	push(t, b, "p", "p1")
	if _, got := popAck(t, b, "g", broker.AckCompleted); len(got) != 1 {
		t.Fatalf("g got %v", got)
	}
	popAck(t, b, "g", broker.AckCompleted)
	var pid int64
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		p, err := partitionP(ctx, tx)
		if err != nil {
			return err
		}
		pid = p.ID
		if _, err := tx.SweepMessages(ctx, broker.MessageSweep{PartitionID: p.ID, UpTo: 1 << 40, Limit: 500, Now: time.Now()}); err != nil {
			return err
		}
		gone, err := tx.DeleteEmptyPartitions(ctx, []int64{p.ID}, time.Now().Add(time.Second), time.Now())
		if err == nil && (len(gone) != 1 || gone[0].ID != p.ID || gone[0].Name != "p") {
			err = fmt.Errorf("deleted %+v, want p", gone)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	d.wmu.Lock()
	_, noted := d.folds.Unfolded[pid]
	_, notedConsumer := d.folds.UnfoldedConsumers[[2]int64{pid, 1}]
	d.wmu.Unlock()
	if !noted || !notedConsumer {
		t.Fatalf("p noted to fold %v, its consumer %v: the test needs both", noted, notedConsumer)
	}
	// n gets p's id again; then every count is brought up to date.
	push(t, b, "n", "n1")
	push(t, b, "n", "n2")
	if err := d.View(ctx, func(tx broker.Tx) error {
		q, err := tx.QueueByName(ctx, "q")
		if err != nil {
			return err
		}
		n, err := tx.PartitionByName(ctx, q.ID, "n")
		if err == nil && n.ID != pid {
			t.Logf("n has id %d, p had %d: the id was not given again", n.ID, pid)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	d.wmu.Lock()
	d.folds.FoldedAt = time.Time{}
	d.wmu.Unlock()
	push(t, b, "r", "r2")
	d.wmu.Lock()
	left := len(d.folds.Unfolded) + len(d.folds.UnfoldedConsumers)
	d.wmu.Unlock()
	if left != 0 {
		t.Fatalf("%d partitions and consumers still to fold: the fold failed", left)
	}
	kept := keptCounts(t, d)
	if kept["partition r"] != 2 || kept["partition n"] != 2 {
		t.Errorf("kept counts %v, want r and n 2 each", kept)
	}
	wantCounts(t, d, b, map[string]int64{"r": 2, "n": 2}, map[string]int64{"g": 3})
}

// The candidates are read a page at a time from the partitions with a
// kept count of 0 (a partition pushed to since the last fold is one
// too), and only those empty by the rule are returned: r, whose count is
// 0 but which holds a message, is passed over, and so is p when the
// bound is before it was made. The delete checks again in its own
// transaction: a partition with a message, or made after the bound,
// stays whatever the list says.
func TestDeleteEmptyPartitionsChecksAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openFolding(t, time.Hour) // r's push is not folded: r's count stays 0
	push(t, b, "p", "p1")
	push(t, b, "r", "r1")
	var p, r broker.Partition
	if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
		var err error
		if p, err = partitionP(ctx, tx); err != nil {
			return err
		}
		if r, err = tx.PartitionByName(ctx, p.QueueID, "r"); err != nil {
			return err
		}
		_, err = tx.SweepMessages(ctx, broker.MessageSweep{PartitionID: p.ID, UpTo: 1 << 40, Limit: 500, Now: time.Now()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := d.View(ctx, func(tx broker.Tx) error {
		for _, c := range []struct {
			name     string
			before   time.Time
			after    int64
			limit    int
			want     []int64
			wantLast int64
		}{
			{"all", later, 0, 500, []int64{p.ID}, 0},
			{"a page of one", later, 0, 1, []int64{p.ID}, p.ID},
			{"the page after p (r, not empty)", later, p.ID, 1, nil, r.ID},
			{"the page after r", later, r.ID, 1, nil, 0},
			{"made before p", p.CreatedAt.Add(-time.Second), 0, 500, nil, 0},
		} {
			ids, last, err := tx.EmptyPartitions(ctx, c.before, time.Now(), c.after, c.limit)
			if err != nil {
				return err
			}
			if fmt.Sprint(ids) != fmt.Sprint(c.want) || last != c.wantLast {
				t.Errorf("%s: candidates %v, last %d; want %v, %d (p %d, r %d)", c.name, ids, last, c.want, c.wantLast, p.ID, r.ID)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		before time.Time
		want   int
	}{{"made after the bound", p.CreatedAt.Add(-time.Second), 0}, {"p only", later, 1}} {
		if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
			gone, err := tx.DeleteEmptyPartitions(ctx, []int64{p.ID, r.ID, 9999}, c.before, time.Now())
			if err == nil && (len(gone) != c.want || c.want == 1 && gone[0].ID != p.ID) {
				t.Errorf("%s: deleted %+v", c.name, gone)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}
