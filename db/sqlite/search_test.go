package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// synced waits until the indexer has applied every row of both logs
// committed.
func synced(t *testing.T, d *Store) {
	t.Helper()
	var want [2]int64
	for i, l := range logTables {
		if err := d.read.QueryRow(`SELECT COALESCE((SELECT seq FROM main.sqlite_sequence WHERE name = ?), 0)`, l).Scan(&want[i]); err != nil {
			t.Fatal(err)
		}
	}
	indexerReaches(t, d, true, fmt.Sprintf("the logs up to %v", want), func() bool {
		return d.search.applied[logAdded].Load() >= want[logAdded] && d.search.applied[logRemoved].Load() >= want[logRemoved]
	})
}

// indexerReaches waits, 30 s at most, until done says the indexer's
// progress is there, hurrying it (as a search does) when hurry.
func indexerReaches(t *testing.T, d *Store, hurry bool, what string, done func() bool) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		d.search.mu.Lock()
		ch := d.search.progress
		d.search.mu.Unlock()
		if done() {
			return
		}
		if hurry {
			d.search.hurryUp()
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("the indexer did not apply %s in 30 s", what)
		}
	}
}

// onSearch runs fn on the indexer's connection (the search file as
// main, the store's attached as store), between the indexer's own
// transactions.
func onSearch(t *testing.T, d *Store, fn func(c *sql.Conn)) {
	t.Helper()
	d.search.txMu.Lock()
	defer d.search.txMu.Unlock()
	fn(d.search.conn)
}

// openManual opens a store at path whose indexer does not run: the test
// applies the log (catchUp, applyBatch) and merges itself.
func openManual(t *testing.T, path string) (*Store, *broker.Broker) {
	t.Helper()
	return openKnobs(t, path, knobs{manualIndexer: true})
}

// openKnobs opens a store at path with k, closed at the test's end.
func openKnobs(t *testing.T, path string, k knobs) (*Store, *broker.Broker) {
	t.Helper()
	d, err := openWith(context.Background(), path, Options{Sync: SyncNormal}, k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, broker.New(broker.Config{Store: d})
}

func logRows(t *testing.T, d *Store) int {
	t.Helper()
	var n int
	if err := d.WriteDB().QueryRow(`SELECT (SELECT COUNT(*) FROM text_index_added) + (SELECT COUNT(*) FROM text_index_removed)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A search that begins before the indexer has applied a dead letter
// filed before it waits for it, and finds it.
func TestASearchWaitsForTheIndexer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openManual(t, filepath.Join(t.TempDir(), "l.db"))
	fileInCommits(t, b, 1)
	if logRows(t, d) != 1 {
		t.Fatalf("log rows %d, want 1", logRows(t, d))
	}
	type result struct {
		page broker.DLQPage
		err  error
	}
	done := make(chan result, 1)
	go func() {
		p, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Text: "w0x7"})
		done <- result{p, err}
	}()
	for d.search.waiting.Load() == 0 {
		select {
		case r := <-done:
			t.Fatalf("the search answered before the indexer applied the log: %+v %v", r.page.Items, r.err)
		default:
			runtime.Gosched()
		}
	}
	if err := d.search.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.page.Items) != 1 || r.page.Items[0].TransactionID != "t-0" {
		t.Fatalf("search = %+v, %v; want t-0", r.page.Items, r.err)
	}
}

// The indexer applies the dead letters of a burst of commits together:
// woken by the first, it lingers for more (here for an hour), unless a
// search waits for them, which it serves at once.
func TestTheIndexerAppliesABurstTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openKnobs(t, filepath.Join(t.TempDir(), "l.db"), knobs{linger: time.Hour, tick: time.Hour})
	var items []broker.PushItem
	for i := range 20 {
		items = append(items, broker.PushItem{Queue: "q", Partition: "p", TransactionID: fmt.Sprintf("t-%d", i), Payload: []byte(fmt.Sprintf(`{"text":"w%dx7"}`, i))})
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 20})
	if err != nil || len(res.Messages) != 20 {
		t.Fatalf("pop: %+v %v", res, err)
	}
	for i, m := range res.Messages { // 20 commits, a dead letter each
		if _, err := b.AckBatch(ctx, "g", []broker.Ack{{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: "declined"}}); err != nil {
			t.Fatal(err)
		}
		for i == 0 && len(d.search.wake) > 0 {
			runtime.Gosched() // the indexer has taken the first commit's call
		}
	}
	start := time.Now()
	if got := found(t, b, broker.DLQQuery{Text: "w19x7"}); !slices.Equal(got, []string{"t-19"}) {
		t.Fatalf("found %v, want t-19", got)
	}
	if took := time.Since(start); took > searchWait/2 {
		t.Fatalf("the search waited %s: the indexer kept lingering", took)
	}
	if n := d.search.commits.Load(); n != 1 {
		t.Fatalf("the indexer applied the 20 dead letters in %d transactions, want 1", n)
	}
	if got := found(t, b, broker.DLQQuery{Text: "w0x7"}); !slices.Equal(got, []string{"t-0"}) {
		t.Fatalf("found %v, want t-0", got)
	}
}

// With no search waiting, the indexer applies what a commit logged once
// its linger is over, by itself (here no tick would: it is an hour).
func TestTheIndexerAppliesAfterItsLinger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openKnobs(t, filepath.Join(t.TempDir(), "l.db"), knobs{linger: 10 * time.Millisecond, tick: time.Hour})
	fileOne(t, ctx, b, "alone", `{"text":"lonely"}`)
	indexerReaches(t, d, false, "the dead letter with no search waiting", func() bool { return d.search.added.Load() >= 1 })
}

// The store's writes do not wait for the indexer: a push commits while
// the indexer holds the search file's write lock (the store's
// connections attach it read-only).
func TestWritesDoNotWaitForTheIndexer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openManual(t, filepath.Join(t.TempDir(), "l.db"))
	fileInCommits(t, b, 2)
	onSearch(t, d, func(c *sql.Conn) {
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `UPDATE main.search_state SET added_applied = added_applied`); err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		fileOne(t, pctx, b, "beside", `{}`)
	})
	if err := d.search.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := found(t, b, broker.DLQQuery{Text: "beside"}); !slices.Equal(got, []string{"beside"}) {
		t.Fatalf("found %v", got)
	}
}

// The log rows applied go, a few in a commit of the store's writer.
func TestTheAppliedLogIsTrimmed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openManual(t, filepath.Join(t.TempDir(), "l.db"))
	fileInCommits(t, b, 3)
	if n := logRows(t, d); n != 3 {
		t.Fatalf("log rows %d, want 3", n)
	}
	if err := d.search.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	d.search.trimmedAt = time.Time{} // no write runs: the writer's field is free
	if _, err := b.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: "next", Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if n := logRows(t, d); n != 0 {
		t.Fatalf("log rows after the indexer applied them and a commit: %d, want 0", n)
	}
	if got := found(t, b, broker.DLQQuery{Text: "w2x9"}); !slices.Equal(got, []string{"t-2"}) {
		t.Fatalf("found %v", got)
	}
}

// The search file is derived: missing, of another database, or out of
// step with the store's log (a copy of either restored from another
// time), it is built again from the dead letters when the store opens;
// the log rows left unapplied at a stop are applied after the restart.
func TestTheSearchFileIsBuiltAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "l.db")
	reopen := func(manual bool) (*Store, *broker.Broker) {
		t.Helper()
		d, err := openWith(ctx, path, Options{Sync: SyncNormal}, knobs{manualIndexer: manual})
		if err != nil {
			t.Fatal(err)
		}
		return d, broker.New(broker.Config{Store: d})
	}
	want := func(b *broker.Broker, text string, ids ...string) {
		t.Helper()
		if got := found(t, b, broker.DLQQuery{Text: text}); !slices.Equal(got, ids) {
			t.Fatalf("%q found %v, want %v", text, got, ids)
		}
	}
	// Filed and left unapplied at a stop: applied after the restart.
	d, b := reopen(true)
	fileInCommits(t, b, 2)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, b = reopen(false)
	want(b, "w1x3", "t-1")
	want(b, "eur", "t-0", "t-1")
	// Missing.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "-wal", "-shm"} {
		os.Remove(searchPath(path) + s)
	}
	d, b = reopen(false)
	want(b, "w0x1499", "t-0")
	// A backup of the store's file, then more dead letters: the backup
	// restored beside the newer search file has it built again, without
	// them.
	backup := filepath.Join(dir, "backup.db")
	if _, err := d.WriteDB().ExecContext(ctx, `VACUUM INTO ?`, backup); err != nil {
		t.Fatal(err)
	}
	fileOne(t, ctx, b, "later", `{"word":"afterwards"}`)
	want(b, "afterwards", "later")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"-wal", "-shm"} {
		os.Remove(path + s)
	}
	if err := os.Rename(backup, path); err != nil {
		t.Fatal(err)
	}
	d, b = reopen(false)
	want(b, "afterwards")
	want(b, "eur", "t-0", "t-1")
	// Another database's search file.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	o, err := Open(ctx, other, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(searchPath(other), searchPath(path)); err != nil {
		t.Fatal(err)
	}
	d, b = reopen(false)
	defer d.Close()
	want(b, "eur", "t-0", "t-1")
}

// A search waits for the dead letters filed, not for the removals a big
// replay logged before them: the indexer applies the additions first.
func TestASearchDoesNotWaitBehindRemovals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openManual(t, filepath.Join(t.TempDir(), "l.db"))
	fileInCommits(t, b, 3)
	if err := d.search.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	// Two removals logged, then one more dead letter filed.
	for _, w := range []string{"w0x1", "w1x1"} {
		if r, err := b.DeleteMatching(ctx, broker.DLQQuery{Queue: "q", Text: w}, "test"); err != nil || r.Done != 1 {
			t.Fatalf("delete %s: %+v, %v", w, r, err)
		}
	}
	fileOne(t, ctx, b, "late", `{"word":"newcomer"}`)
	if n, err := d.search.applyBatch(ctx, logAdded); err != nil || n != 1 {
		t.Fatalf("additions applied: %d, %v; want 1", n, err)
	}
	if d.search.applied[logRemoved].Load() != 0 {
		t.Fatal("the removals were applied: the test shows nothing")
	}
	// No indexer runs: a search that waited would fail after searchWait.
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	page, err := b.DeadLetters(sctx, broker.DLQQuery{Queue: "q", Text: "newcomer"})
	if err != nil || len(page.Items) != 1 || page.Items[0].TransactionID != "late" {
		t.Fatalf("search = %+v, %v; want late", page.Items, err)
	}
	// The removed dead letters are not found, though their entries wait.
	if got := found(t, b, broker.DLQQuery{Text: "eur"}); !slices.Equal(got, []string{"t-2"}) {
		t.Fatalf("eur found %v, want t-2 alone", got)
	}
}

// A copy of the database from before what the search file saw, restored
// beside it, has the search file built again, though the rows it
// applied are all in the copy: the reviewer's case, where a dead letter
// filed, then backed up, then removed, is applied from a snapshot that
// no longer has it, and the backup restored has it again.
func TestARestoredOlderDatabaseRebuildsTheSearchFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "l.db")
	d, b := openManual(t, path)
	fileInCommits(t, b, 1)
	backup := filepath.Join(dir, "backup.db")
	if _, err := d.WriteDB().ExecContext(ctx, `VACUUM INTO ?`, backup); err != nil {
		t.Fatal(err)
	}
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("list: %+v %v", page.Items, err)
	}
	if _, err := b.Delete(ctx, page.Items[0].MessageID(), "g", "test"); err != nil {
		t.Fatal(err)
	}
	// The addition, applied from a snapshot without its dead letter.
	if n, err := d.search.applyBatch(ctx, logAdded); err != nil || n != 1 {
		t.Fatalf("additions applied: %d, %v", n, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"-wal", "-shm"} {
		os.Remove(path + s)
	}
	if err := os.Rename(backup, path); err != nil {
		t.Fatal(err)
	}
	d2, err := Open(ctx, path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if got := found(t, broker.New(broker.Config{Store: d2}), broker.DLQQuery{Text: "w0x1"}); !slices.Equal(got, []string{"t-0"}) {
		t.Fatalf("found %v after the restore, want t-0", got)
	}
}

// Read-your-writes whichever process filed: a dead letter filed through
// one store is found at once through another on the same file (a
// command beside the server), whose own count of the indexer's progress
// learns what the other applied.
func TestASearchFindsWhatAnotherStoreFiled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	a, err := Open(ctx, path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	other, err := Open(ctx, path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	fileInCommits(t, broker.New(broker.Config{Store: other}), 2)
	if got := found(t, broker.New(broker.Config{Store: a}), broker.DLQQuery{Text: "w1x5"}); !slices.Equal(got, []string{"t-1"}) {
		t.Fatalf("found %v, want t-1", got)
	}
}

// While the indexer fails, a search that would wait for it fails at
// once, unavailable, saying why, rather than hold its connection.
func TestASearchFailsFastWhileTheIndexerFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	fileInCommits(t, b, 1)
	synced(t, d)
	if _, err := d.ExecSearchUncatalogued(ctx, `DROP TABLE main.search_state`); err != nil {
		t.Fatal(err)
	}
	fileOne(t, ctx, b, "stuck", `{}`)
	start := time.Now()
	_, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Text: "stuck"})
	if !errors.Is(err, broker.ErrUnavailable) || !strings.Contains(err.Error(), "search index") || !strings.Contains(err.Error(), "search_state") {
		t.Fatalf("search while the indexer fails: %v; want unavailable, naming the search index and the cause", err)
	}
	if took := time.Since(start); took >= searchWait {
		t.Fatalf("the search waited %s", took)
	}
	// A read that does not search goes on.
	if page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q"}); err != nil || len(page.Items) != 2 {
		t.Fatalf("list: %d, %v", len(page.Items), err)
	}
}

// The pages the indexes free (a replay's removals, merged) go back to
// the file system: the search file is made with incremental auto_vacuum,
// and the indexer gives back what it holds free past its keep.
func TestTheSearchFileGivesItsFreePagesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openManual(t, filepath.Join(t.TempDir(), "l.db"))
	d.search.keep = 16
	fileInCommits(t, b, 30)
	if err := d.search.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	pages := func() (total, free int64) {
		t.Helper()
		onSearch(t, d, func(c *sql.Conn) {
			if err := c.QueryRowContext(ctx, `PRAGMA main.page_count`).Scan(&total); err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRowContext(ctx, `PRAGMA main.freelist_count`).Scan(&free); err != nil {
				t.Fatal(err)
			}
		})
		return total, free
	}
	if r, err := b.DeleteMatching(ctx, broker.DLQQuery{Queue: "q", Text: "eur"}, "test"); err != nil || r.Done != 30 {
		t.Fatalf("delete: %+v, %v", r, err)
	}
	if err := d.search.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.search.merge(ctx); err != nil {
		t.Fatal(err)
	}
	total, free := pages()
	if free < d.search.keep {
		t.Fatalf("%d free pages of %d after the removals: the test shows nothing", free, total)
	}
	if err := d.search.giveBack(ctx); err != nil {
		t.Fatal(err)
	}
	total2, free2 := pages()
	if free2 >= d.search.keep || total2 > total-free+d.search.keep {
		t.Fatalf("after giving back: %d pages, %d free (before %d, %d free)", total2, free2, total, free)
	}
}

// Giving pages back reads them through a small cache (readOnceCacheKiB),
// not the indexer's usual one: after moving some 10 MB of pages into the
// free ones before them, the indexer's connection holds no more than the
// small cache's pages, and its usual cache size is back (bench's S3: the
// give-back at the server's start left 15 MB in the cache).
func TestGivingPagesBackReadsThroughASmallCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := openManual(t, filepath.Join(t.TempDir(), "l.db"))
	used := func(c *sql.Conn) int {
		t.Helper()
		n := -1
		if err := c.Raw(func(dc any) error { n = cacheUsed(dc.(*sqlite3.SQLiteConn)); return nil }); err != nil || n < 0 {
			t.Fatalf("cache used: %d, %v", n, err)
		}
		return n
	}
	var free int64
	onSearch(t, d, func(c *sql.Conn) {
		// 2,500 pages freed before 2,500 pages in use, which the give-back
		// moves into them; then the cache emptied (a smaller size drops
		// its pages).
		for _, q := range []string{
			`CREATE TABLE main.scratch_a (b BLOB)`,
			`INSERT INTO main.scratch_a WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500) SELECT zeroblob(3000) FROM n`,
			`CREATE TABLE main.scratch_b (b BLOB)`,
			`INSERT INTO main.scratch_b WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500) SELECT zeroblob(3000) FROM n`,
			`DROP TABLE main.scratch_a`,
			`PRAGMA main.cache_size = -100`,
			`PRAGMA main.cache_size = -` + strconv.Itoa(connCacheKiB),
		} {
			if _, err := c.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if err := c.QueryRowContext(ctx, `PRAGMA main.freelist_count`).Scan(&free); err != nil {
			t.Fatal(err)
		}
	})
	if free < 2000 {
		t.Fatalf("%d free pages: the test shows nothing", free)
	}
	if err := d.search.giveBack(ctx); err != nil {
		t.Fatal(err)
	}
	onSearch(t, d, func(c *sql.Conn) {
		var free2, size int64
		if err := c.QueryRowContext(ctx, `PRAGMA main.freelist_count`).Scan(&free2); err != nil || free2 >= d.search.keep {
			t.Fatalf("%d free pages after giving %d back, %v", free2, free, err)
		}
		n := used(c)
		t.Logf("%d bytes of pages cached after giving %d pages back", n, free)
		if limit := readOnceCacheKiB*1024 + 256<<10; n > limit {
			t.Errorf("the indexer's connection holds %d bytes of pages after giving %d pages back, want at most %d", n, free, limit)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA main.cache_size`).Scan(&size); err != nil || size != -connCacheKiB {
			t.Errorf("cache_size after giving back: %d, %v; want %d", size, err, -connCacheKiB)
		}
	})
}

// A clean close leaves no write-ahead log behind, of either file: the
// last connection of each to close is one that may write it (a log left
// by a read-only one, and its -shm, made by the service's user, would
// keep another user from opening the database).
func TestCloseLeavesNoLogBehind(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.db")
	d, err := Open(context.Background(), path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	fileInCommits(t, broker.New(broker.Config{Store: d}), 3)
	synced(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path + "-wal", path + "-shm", searchPath(path) + "-wal", searchPath(path) + "-shm"} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s is left after a clean close", filepath.Base(f))
		}
	}
}

// fileOne pushes one message to q and files it in g's dead letters, its
// error text its transaction id.
func fileOne(t *testing.T, ctx context.Context, b *broker.Broker, txid, payload string) {
	t.Helper()
	if _, err := b.Push(ctx, []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: txid, Payload: []byte(payload)}}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1})
	if err != nil || len(res.Messages) != 1 {
		t.Fatalf("pop: %+v %v", res, err)
	}
	if _, err := b.Ack(ctx, broker.Ack{TransactionID: txid, PartitionID: res.Messages[0].PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: txid, Group: "g"}); err != nil {
		t.Fatal(err)
	}
}

// Searches that wait for the indexer each hold a connection of the
// reading pool while they wait: past half of the pool (maxWaiting) one
// more is refused at once, unavailable, saying so, and the reads that
// search nothing keep the other half. Those waiting are answered once
// the indexer has applied what they wait for.
func TestSearchesWaitingForTheIndexerLeaveReadsTheirConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openManual(t, filepath.Join(t.TempDir(), "l.db"))
	fileOne(t, ctx, b, "late", `{"text":"tardy"}`) // not applied: the indexer is run by hand
	type answer struct {
		found []string
		err   error
	}
	answers := make(chan answer, maxWaiting)
	for range maxWaiting {
		go func() {
			page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Group: "g", Text: "tardy"})
			var a answer
			a.err = err
			if err == nil {
				for _, dl := range page.Items {
					a.found = append(a.found, dl.TransactionID)
				}
			}
			answers <- a
		}()
	}
	allWaiting(t, d)

	start := time.Now()
	_, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Group: "g", Text: "tardy"})
	if !errors.Is(err, broker.ErrUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("%d searches wait for it already", maxWaiting)) {
		t.Fatalf("a search past %d waiting: %v; want unavailable, saying how many wait", maxWaiting, err)
	}
	if took := time.Since(start); took >= searchWait {
		t.Fatalf("the search past the bound waited %s", took)
	}
	if page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Group: "g"}); err != nil || len(page.Items) != 1 {
		t.Fatalf("a list while %d searches wait: %d dead letters, %v", maxWaiting, len(page.Items), err)
	}

	if err := d.search.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	for range maxWaiting {
		a := <-answers
		if a.err != nil || !slices.Equal(a.found, []string{"late"}) {
			t.Errorf("a waiting search: %v, %v; want [late]", a.found, a.err)
		}
	}
	if n := d.search.waiting.Load(); n != 0 {
		t.Errorf("%d searches still counted waiting", n)
	}
}

// allWaiting returns once maxWaiting searches wait for the indexer (each
// counts itself before it waits), 30 s at most.
func allWaiting(t *testing.T, d *Store) {
	t.Helper()
	tick, deadline := time.NewTicker(time.Millisecond), time.After(30*time.Second)
	defer tick.Stop()
	for d.search.waiting.Load() < maxWaiting {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d searches waiting after 30 s, want %d", d.search.waiting.Load(), maxWaiting)
		}
	}
}

// An export by text waits for the indexer before its first page only:
// its later pages read within the bound it took as it began, which
// that wait covered, so they are not refused while maxWaiting searches
// wait for a dead letter filed during the export (past the bound, and
// not exported). (Not parallel: it makes the index's blocks small, so
// that every page reads the index.)
func TestAnExportWaitsForTheIndexerBeforeItsFirstPageOnly(t *testing.T) {
	defer func(b, r int) { sqlcore.ExportBlock, sqlcore.ExportBlockReads = b, r }(sqlcore.ExportBlock, sqlcore.ExportBlockReads)
	sqlcore.ExportBlock, sqlcore.ExportBlockReads = 3, 2
	ctx := context.Background()
	d, b := openManual(t, filepath.Join(t.TempDir(), "e.db"))
	var want []string
	for i := range 20 {
		txid := fmt.Sprintf("m%02d", i)
		fileOne(t, ctx, b, txid, `{"text":"tardy"}`)
		want = append(want, txid)
	}
	if err := d.search.catchUp(ctx); err != nil {
		t.Fatal(err)
	}

	answers := make(chan error, maxWaiting)
	var got []string
	pages := 0
	res, err := b.Export(ctx, broker.DLQQuery{Queue: "q", Group: "g", Text: "tardy"}, "ndjson", "test", func(page []broker.DeadLetter) (int, error) {
		pages++
		for _, dl := range page {
			got = append(got, dl.TransactionID)
		}
		if pages > 1 {
			return len(page), nil
		}
		fileOne(t, ctx, b, "late", `{"text":"tardy"}`) // not applied: the indexer is run by hand
		for range maxWaiting {
			go func() {
				p, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Group: "g", Text: "tardy"})
				if err == nil && (len(p.Items) == 0 || p.Items[0].TransactionID != "late") {
					err = fmt.Errorf("the newest found is not late: %d found", len(p.Items))
				}
				answers <- err
			}()
		}
		allWaiting(t, d)
		return len(page), nil
	})
	if err != nil || !res.Complete {
		t.Fatalf("the export beside %d waiting searches: %+v, %v", maxWaiting, res, err)
	}
	if pages < 3 {
		t.Fatalf("the export read %d pages; the test needs several", pages)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("exported %v, want %v", got, want)
	}

	if err := d.search.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	for range maxWaiting {
		if err := <-answers; err != nil {
			t.Errorf("a waiting search: %v", err)
		}
	}
}
