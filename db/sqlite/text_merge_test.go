package sqlite

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// segmentsByLevel counts the segments of each level of a full-text index
// (FTS4's _segdir), and tells whether a merge is begun and not finished
// (its hint, the _stat row 1, not empty).
func segmentsByLevel(t *testing.T, d *Store, index string) (map[int]int, bool) {
	t.Helper()
	rows, err := d.WriteDB().Query(`SELECT level, COUNT(*) FROM ` + index + `_segdir GROUP BY level`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	levels := map[int]int{}
	for rows.Next() {
		var level, n int
		if err := rows.Scan(&level, &n); err != nil {
			t.Fatal(err)
		}
		levels[level] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var begun bool
	if err := d.WriteDB().QueryRow(`SELECT EXISTS (SELECT 1 FROM ` + index + `_stat WHERE id = 1 AND length(value) > 0)`).Scan(&begun); err != nil {
		t.Fatal(err)
	}
	return levels, begun
}

// matches are the docids an index finds for each of words, newest first.
func matches(t *testing.T, d *Store, index string, words []string) [][]int64 {
	t.Helper()
	var out [][]int64
	for _, w := range words {
		rows, err := d.WriteDB().Query(`SELECT docid FROM `+index+` WHERE `+index+` MATCH ? ORDER BY docid DESC`, w)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		out = append(out, ids)
	}
	return out
}

// The merge steps of the text indexes (MergeTextIndex): a step writes a
// few pages and leaves the rest of its merge to the next (FTS4's hint),
// steps run until none is due leave no level of either index with
// textMergeSegments segments or more (a commit would otherwise merge a
// whole level once it filled), and the indexes find exactly what they
// found, whole (FTS4's integrity-check).
func TestTextIndexMergesInBoundedSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	// Ten commits that each file a dead letter: ten segments at level 0
	// of each index, the payloads' of several pages each.
	const commits = 10
	fileInCommits(t, b, commits)
	words := []string{"eur", "w0x0", "w9x1499", "w5x700", "card", "declined", "t-3", "n"}
	before := map[string][][]int64{}
	for _, ix := range textIndexes {
		levels, begun := segmentsByLevel(t, d, ix)
		if levels[0] != commits || len(levels) != 1 || begun {
			t.Fatalf("%s: segments by level %v, merge begun %t; want %d at level 0", ix, levels, begun, commits)
		}
		before[ix] = matches(t, d, ix, words)
	}
	if n := len(before["dead_letter_payloads"][0]); n != commits {
		t.Fatalf("eur found in %d payloads, want %d", n, commits)
	}
	step := func(pages int) bool {
		t.Helper()
		var more bool
		if err := d.Update(ctx, broker.UpdateOptions{Background: true}, func(tx broker.Tx) (err error) {
			more, err = tx.MergeTextIndex(ctx, pages)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return more
	}
	// A look from a read snapshot (pages 0) finds merging due.
	look := func() bool {
		t.Helper()
		var due bool
		if err := d.View(ctx, func(tx broker.Tx) (err error) {
			due, err = tx.MergeTextIndex(ctx, 0)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return due
	}
	if !look() {
		t.Fatal("a look finds no merging due with ten segments at level 0")
	}
	// Steps of one page: the payloads' merge of six segments of several
	// pages each takes several steps, and is left begun between them.
	steps, begunBetween := 0, false
	for more := true; more; steps++ {
		if steps > 1000 {
			t.Fatal("the steps never end")
		}
		more = step(1)
		if _, begun := segmentsByLevel(t, d, "dead_letter_payloads"); begun && more {
			begunBetween = true
		}
	}
	t.Logf("%d steps of one page", steps)
	if !begunBetween || steps < 4 {
		t.Fatalf("%d steps of one page, a merge left begun between them: %t; want bounded steps", steps, begunBetween)
	}
	for _, ix := range textIndexes {
		levels, begun := segmentsByLevel(t, d, ix)
		if begun || slices.ContainsFunc(slices.Collect(maps.Values(levels)), func(n int) bool { return n >= textMergeSegments }) {
			t.Fatalf("%s after the steps: segments by level %v, merge begun %t; want each level below %d", ix, levels, begun, textMergeSegments)
		}
		if levels[0] == commits {
			t.Fatalf("%s: level 0 still holds %d segments", ix, commits)
		}
		if got := matches(t, d, ix, words); !slices.EqualFunc(got, before[ix], slices.Equal) {
			t.Fatalf("%s finds other dead letters after the merge", ix)
		}
		if _, err := d.WriteDB().Exec(fmt.Sprintf(`INSERT INTO %s (%s) VALUES ('integrity-check')`, ix, ix)); err != nil {
			t.Fatalf("%s: %v", ix, err)
		}
	}
	// Nothing due: a look says so, and a step does nothing and says so.
	if look() || step(broker.TextMergePages) {
		t.Fatal("a step after the index is tidy says more is due")
	}
	// A search through the broker finds the same.
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Text: "w7x1234"})
	if err != nil || len(page.Items) != 1 || page.Items[0].TransactionID != "t-7" {
		t.Fatalf("search after the merge: %+v %v", page.Items, err)
	}
}

// fileInCommits files n dead letters in queue q, a commit each: a
// segment each at level 0 of both indexes, the payloads' of several pages
// (a payload of 1,500 words of its own).
func fileInCommits(t *testing.T, b *broker.Broker, n int) {
	t.Helper()
	ctx := context.Background()
	var items []broker.PushItem
	for i := range n {
		var text strings.Builder
		for w := range 1500 {
			fmt.Fprintf(&text, "w%dx%d ", i, w)
		}
		items = append(items, broker.PushItem{Queue: "q", Partition: "p", TransactionID: fmt.Sprintf("t-%d", i),
			Payload: []byte(fmt.Sprintf(`{"n":%d,"currency":"EUR","text":%q}`, i, text.String()))})
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: n})
	if err != nil || len(res.Messages) != n {
		t.Fatalf("pop: %+v %v", res, err)
	}
	for _, m := range res.Messages {
		if _, err := b.AckBatch(ctx, "g", []broker.Ack{{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: "card declined " + m.TransactionID}}); err != nil {
			t.Fatal(err)
		}
	}
}

// The text_index task of maintenance merges what the acks' commits made
// due, in steps, until none is.
func TestMaintenanceMergesTheTextIndex(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	fileInCommits(t, b, 10)
	rep, err := b.Maintain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskTextIndex); r.Chunks < 2 || r.Err != nil {
		t.Fatalf("text index task %+v, want steps", r)
	}
	for _, ix := range textIndexes {
		levels, begun := segmentsByLevel(t, d, ix)
		if begun || levels[0] >= textMergeSegments {
			t.Fatalf("%s after maintenance: segments by level %v, merge begun %t", ix, levels, begun)
		}
	}
}
