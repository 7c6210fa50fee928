package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// segmentsByLevel counts the segments of each level of a full-text index
// (FTS4's _segdir), and tells whether a merge is begun and not finished
// (its hint, the _stat row 1, not empty).
func segmentsByLevel(t *testing.T, d *Store, index string) (levels map[int]int, begun bool) {
	t.Helper()
	levels = map[int]int{}
	onSearch(t, d, func(c *sql.Conn) {
		rows, err := c.QueryContext(context.Background(), `SELECT level, COUNT(*) FROM main.`+index+`_segdir GROUP BY level`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
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
		if err := c.QueryRowContext(context.Background(), `SELECT EXISTS (SELECT 1 FROM main.`+index+`_stat WHERE id = 1 AND length(value) > 0)`).Scan(&begun); err != nil {
			t.Fatal(err)
		}
	})
	return levels, begun
}

// matches are the docids an index finds for each of words, newest first.
func matches(t *testing.T, d *Store, index string, words []string) [][]int64 {
	t.Helper()
	var out [][]int64
	for _, w := range words {
		rows, err := d.read.Query(`SELECT docid FROM `+index+` WHERE `+index+` MATCH ? ORDER BY docid DESC`, w)
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

// The indexer's merge steps of the search file: a step writes a few
// pages and leaves the rest of its merge to the next (FTS4's hint),
// steps run until none is due leave no level of either index with
// textMergeSegments segments or more (a commit would otherwise merge a
// whole level once it filled), and the indexes find exactly what they
// found, whole (FTS4's integrity-check).
func TestTextIndexMergesInBoundedSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openManual(t, filepath.Join(t.TempDir(), "l.db"))
	// Ten dead letters applied a transaction each: ten segments at level
	// 0 of each index, the payloads' of several pages each.
	const commits = 10
	fileInCommits(t, b, commits)
	d.search.batch = 1
	applyEach(t, d, commits)
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
	// Steps of one page: the payloads' merge of six segments of several
	// pages each takes several steps, and is left begun between them.
	steps, begunBetween := 0, false
	for more := true; more; steps++ {
		if steps > 1000 {
			t.Fatal("the steps never end")
		}
		var err error
		if more, err = d.search.mergeStep(ctx, 1); err != nil {
			t.Fatal(err)
		}
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
		onSearch(t, d, func(c *sql.Conn) {
			if _, err := c.ExecContext(ctx, fmt.Sprintf(`INSERT INTO main.%s (%s) VALUES ('integrity-check')`, ix, ix)); err != nil {
				t.Fatalf("%s: %v", ix, err)
			}
		})
	}
	// Nothing due: a step does nothing and says so.
	if more, err := d.search.mergeStep(ctx, textMergePages); err != nil || more {
		t.Fatalf("a step after the index is tidy: more %t, %v", more, err)
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

// The indexer merges what it applied, in steps, until no level of
// either index is due (merge, as its loop runs it after each catch-up).
func TestTheIndexerMergesWhatItApplies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openManual(t, filepath.Join(t.TempDir(), "l.db"))
	fileInCommits(t, b, 10)
	d.search.batch = 1
	applyEach(t, d, 10)
	if levels, _ := segmentsByLevel(t, d, "dead_letter_payloads"); levels[0] != 10 {
		t.Fatalf("segments by level before the merge %v: the test shows nothing", levels)
	}
	if err := d.search.merge(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ix := range textIndexes {
		levels, begun := segmentsByLevel(t, d, ix)
		if begun || levels[0] >= textMergeSegments {
			t.Fatalf("%s after the indexer's merge: segments by level %v, merge begun %t", ix, levels, begun)
		}
	}
	if got := found(t, b, broker.DLQQuery{Text: "w4x44"}); !slices.Equal(got, []string{"t-4"}) {
		t.Fatalf("found %v", got)
	}
}

// applyEach applies n rows of the log of additions, a transaction each
// (the indexer's batches, without its merge steps between them).
func applyEach(t *testing.T, d *Store, n int) {
	t.Helper()
	for range n {
		if k, err := d.search.applyBatch(context.Background(), logAdded); err != nil || k != 1 {
			t.Fatalf("apply: %d, %v", k, err)
		}
	}
}
