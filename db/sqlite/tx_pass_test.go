package sqlite

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// CopyGroups names the copies replayed to one group only, by the replays
// row alone: a copy for every group (group_id 0) and a seq with no row
// are left out, whatever the messages' transactionIds say.
func TestCopyGroupsReadsTheReplaysRow(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	ctx := context.Background()
	for _, r := range [][2]int64{{10, 3}, {11, 0}, {12, 4}, {13, 3}} {
		if _, err := d.WriteDB().ExecContext(ctx, `INSERT INTO replays (copy_seq, seq, group_id, actor, at) VALUES (?, 1, ?, 'user:a', 0)`, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		seqs []int64
		want map[int64]int64
	}{
		{nil, map[int64]int64{}},
		{[]int64{11}, map[int64]int64{}},
		{[]int64{99}, map[int64]int64{}},
		{[]int64{10}, map[int64]int64{10: 3}},
		{[]int64{13, 10, 11, 12, 99}, map[int64]int64{10: 3, 12: 4, 13: 3}},
	} {
		var got map[int64]int64
		err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
			var err error
			got, err = tx.CopyGroups(ctx, c.seqs)
			return err
		})
		if err != nil || got == nil || !maps.Equal(got, c.want) {
			t.Errorf("CopyGroups(%v) = %v, %v; want %v", c.seqs, got, err, c.want)
		}
	}
}

// The pop's lookup goes by the replays primary key, one probe a seq.
func TestCopyGroupsPlan(t *testing.T) {
	t.Parallel()
	d, _ := openBroker(t)
	text := queryPlan(t, d, sqlcore.CopyGroupsQuery, `[1,2]`)
	if !strings.Contains(text, "SEARCH r USING INTEGER PRIMARY KEY (rowid=?)") || strings.Contains(text, "SCAN r") {
		t.Errorf("plan\n%s\nwants replays by its primary key", text)
	}
}
