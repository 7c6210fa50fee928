package sqlite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// A dead letter's count is one probe of replays' primary key; the bulk
// filter's cap condition probes replays and queues by theirs, a row at a
// time, along the filter's own index.
func TestReplayCapQueriesUseThePrimaryKeys(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	if text := queryPlan(t, d, sqlcore.ReplayCountsSQL, "[1,2]"); !strings.Contains(text, "SEARCH r USING INTEGER PRIMARY KEY (rowid=?)") || strings.Contains(text, "SCAN r") {
		t.Errorf("replay counts plan\n%s", text)
	}
	bound := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for name, f := range map[string]broker.Filter{
		"Queue":      {QueueID: 1, MaxID: 10, MaxFailedAt: bound},
		"Group":      {QueueID: 1, GroupID: 2, MaxID: 10, MaxFailedAt: bound},
		"AllQueues":  {MaxID: 10, MaxFailedAt: bound},
		"Partition":  {QueueID: 1, PartitionID: 3, MaxID: 10, MaxFailedAt: bound},
		"ErrorGroup": {QueueID: 1, Fingerprint: "f", MaxID: 10, MaxFailedAt: bound},
	} {
		for _, c := range []int{broker.CapBelow, broker.CapAt} {
			f.Cap = c
			w, args := whereOf(f)
			text := queryPlan(t, d, sqlcore.KeySelect+w+` ORDER BY d.failed_at DESC, d.id DESC LIMIT ?`, append(args, 10)...)
			if strings.Contains(text, "SCAN r") || strings.Contains(text, "SCAN q") || strings.Contains(text, "TEMP B-TREE") ||
				!strings.Contains(text, "SEARCH r USING INTEGER PRIMARY KEY (rowid=?)") || !strings.Contains(text, "SEARCH q USING INTEGER PRIMARY KEY (rowid=?)") {
				t.Errorf("%s cap %d: plan\n%s", name, c, text)
			}
			before, bargs := whereOf(broker.Filter{QueueID: f.QueueID, GroupID: f.GroupID, PartitionID: f.PartitionID, Fingerprint: f.Fingerprint, MaxID: 10, MaxFailedAt: bound})
			plain := queryPlan(t, d, sqlcore.KeySelect+before+` ORDER BY d.failed_at DESC, d.id DESC LIMIT ?`, append(bargs, 10)...)
			if first := strings.SplitN(text, "\n", 2)[0]; first != strings.SplitN(plain, "\n", 2)[0] {
				t.Errorf("%s cap %d: the cap changed the index walked: %q, without it %q", name, c, first, plain)
			}
		}
	}
}

// Migration 0026 gives the copies made before it their depth along the
// chain that is kept.
func TestReplayDepthBackfill(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	// 10 ← 11 ← 12 ← 13, and 20 ← 21; 30 ← 31 whose 30 is a copy whose
	// row the history sweep took: its chain starts at 31.
	execSQL(t, d, `INSERT INTO replays (copy_seq, seq, actor, at) VALUES (11, 10, 'a', 0), (12, 11, 'a', 0), (13, 12, 'a', 0), (21, 20, 'a', 0), (31, 30, 'a', 0)`)
	reapply(t, d, 26, "0026_replay_depth.sql", `ALTER TABLE replays DROP COLUMN depth`, `ALTER TABLE jobs DROP COLUMN capped`)
	var got map[int64]int
	view(t, d, func(tx broker.Tx) (err error) {
		got, err = tx.ReplayCounts(context.Background(), []int64{10, 11, 12, 13, 20, 21, 31, 99})
		return err
	})
	want := map[int64]int{11: 1, 12: 2, 13: 3, 21: 1, 31: 1}
	if len(got) != len(want) {
		t.Fatalf("depths %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("depths %v, want %v", got, want)
		}
	}
}
