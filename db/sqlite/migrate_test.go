package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Migration 0008 gives the dead letters of a database made before it
// their messages' transactionIds, so that the filter by transactionId
// finds them.
func TestDeadLetterTransactionIDsAreBackfilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	var items []broker.PushItem
	for _, id := range []string{"order-1", "order-2", "order-3"} {
		items = append(items, broker.PushItem{Queue: "q", Partition: "p", TransactionID: id, Payload: []byte(`{}`)})
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 3})
	if err != nil || len(res.Messages) != 3 {
		t.Fatalf("pop = %+v, %v", res, err)
	}
	for _, m := range res.Messages {
		if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: "boom", Group: "g"}); err != nil {
			t.Fatal(err)
		}
	}

	// Back to the schema before 0008, then 0008 again.
	reapply(t, d, 8, "0008_dead_letter_transaction.sql",
		`DROP INDEX dead_letters_transaction`,
		`ALTER TABLE dead_letters DROP COLUMN transaction_id`)
	w := d.WriteDB()

	var mismatched, total int
	if err := w.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(d.transaction_id <> m.transaction_id), 0)
		FROM dead_letters d JOIN messages m ON m.seq = d.seq`).Scan(&total, &mismatched); err != nil {
		t.Fatal(err)
	}
	if total != 3 || mismatched != 0 {
		t.Fatalf("after the migration: %d dead letters, %d with another transactionId than their message; want 3, 0", total, mismatched)
	}
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", TransactionID: "order-2"})
	if err != nil || len(page.Items) != 1 || page.Items[0].TransactionID != "order-2" {
		t.Fatalf("filter by order-2 = %+v, %v; want that one dead letter", page, err)
	}
}

// Migration 0009 marks ready the consumers of a database made before it
// that have messages past their cursor, and only those.
func TestConsumerReadinessIsBackfilled(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	push(t, b, "x", "x1")
	push(t, b, "y", "y1")
	drained, ids := popAck(t, b, "g", broker.AckCompleted)
	if len(ids) != 1 {
		t.Fatalf("pop got %v from %q, want one message", ids, drained)
	}
	// Whichever partition the pop took is drained; the other still waits.
	want := map[string]bool{"x": false, "y": false}
	for p := range want {
		want[p] = p != drained
	}

	// Back to the schema before 0009, then 0009 again.
	reapply(t, d, 9, "0009_consumers_ready.sql",
		`DROP INDEX consumers_ready`,
		`ALTER TABLE consumers DROP COLUMN ready`,
		`CREATE INDEX consumers_ready ON consumers (queue_id, group_id, leased_at)`)
	wantReady(t, d, "g", want)
	if _, ids := popAck(t, b, "g", broker.AckCompleted); len(ids) != 1 {
		t.Fatalf("pop after the migration got %v, want the waiting message", ids)
	}
}

// A database that a newer Lazarus has migrated is refused, with the
// versions in the message.
func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	d, err := Open(ctx, path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteDB().ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, '0099_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if d, err := Open(ctx, path, SyncNormal); err == nil {
		d.Close()
		t.Fatal("a database of schema version 99 was opened")
	} else if !strings.Contains(err.Error(), "schema version 99") || !strings.Contains(err.Error(), "newer Lazarus") {
		t.Fatalf("error %q does not say why", err)
	}
}

// laterDeadLetterColumns add to the table of preAutoincrement the columns
// of the migrations after 0013 (reapplyLaterDeadLetterMigrations adds
// them again after 0013 ran).
var laterDeadLetterColumns = []string{
	`ALTER TABLE dead_letters ADD COLUMN fingerprint TEXT NOT NULL DEFAULT ''`, // 0014
	`CREATE INDEX dead_letters_fingerprint ON dead_letters (queue_id, fingerprint, failed_at DESC, id DESC)`,
	`ALTER TABLE dead_letters ADD COLUMN trace_id TEXT NOT NULL DEFAULT ''`, // 0016
	`CREATE INDEX dead_letters_trace ON dead_letters (trace_id) WHERE trace_id <> ''`,
	`ALTER TABLE dead_letters ADD COLUMN error_bytes INTEGER NOT NULL DEFAULT 0`, // 0017
	`ALTER TABLE dead_letters ADD COLUMN payload BLOB`,                           // 0020
	`ALTER TABLE dead_letters ADD COLUMN pushed_at INTEGER NOT NULL DEFAULT 0`,
	`CREATE INDEX dead_letters_partition ON dead_letters (partition_id) WHERE partition_id > 0`, // 0022
	`ALTER TABLE dead_letters ADD COLUMN consumer_version TEXT NOT NULL DEFAULT ''`,             // 0034
	`CREATE INDEX dead_letters_version ON dead_letters (queue_id, consumer_version, failed_at DESC, id DESC) WHERE consumer_version <> ''`,
}

// reapplyLaterDeadLetterMigrations runs again the migrations after 0013
// that change dead_letters, as a start after 0013 would.
func reapplyLaterDeadLetterMigrations(t *testing.T, d *Store) {
	t.Helper()
	reapply(t, d, 14, "0014_error_groups.sql", append(undo33,
		`DROP TABLE error_groups`, `DROP TABLE error_group_hours`, `DROP TABLE error_group_days`,
		`CREATE TABLE error_counts (queue_id INTEGER NOT NULL, group_id INTEGER NOT NULL, line TEXT NOT NULL, count INTEGER NOT NULL,
			PRIMARY KEY (queue_id, group_id, line)) STRICT, WITHOUT ROWID`)...)
	reapply(t, d, 16, "0016_dead_letter_trace.sql")
	reapply(t, d, 17, "0017_dead_letter_error_bytes.sql")
	reapply(t, d, 20, "0020_message_retention.sql",
		`DROP INDEX replays_partition`, // 0022's, on a column of 0020: made again below
		`ALTER TABLE removed_dead_letters DROP COLUMN payload`, `ALTER TABLE removed_dead_letters DROP COLUMN pushed_at`,
		`DROP TABLE settle_marks`, `ALTER TABLE job_outcomes DROP COLUMN expired`,
		`ALTER TABLE replays DROP COLUMN original_at`, `ALTER TABLE replays DROP COLUMN original_txid`, `ALTER TABLE replays DROP COLUMN partition_id`)
	// 0022's indexes are IF NOT EXISTS: only dead_letters_partition,
	// which 0013's copy of the table dropped, is made again.
	reapply(t, d, 22, "0022_partition_sweep.sql")
	reapply(t, d, 33, "0033_error_group_states.sql")
	reapply(t, d, 34, "0034_consumer_version.sql",
		`ALTER TABLE attempts DROP COLUMN consumer_version`, `ALTER TABLE removed_dead_letters DROP COLUMN consumer_version`,
		`DROP TABLE error_group_versions`)
	// 0042's triggers went with error_group_hours (its table with 0014's undo).
	reapply(t, d, 42, "0042_error_group_days.sql")
}

// undo33 takes away what migration 0033 added (but error_group_hours'
// columns: the undo of 0014 drops that table), so that it can be applied
// again after 0014.
var undo33 = []string{
	`DROP TABLE error_group_states`, `DROP TABLE error_group_history`,
	`ALTER TABLE replay_outcomes DROP COLUMN error_group`,
}

// preAutoincrement is the dead_letters table as migrations 0001 and 0008
// left it: row ids without AUTOINCREMENT, which SQLite gives again once
// the highest rows are gone.
var preAutoincrement = []string{
	`CREATE TABLE dead_letters_old (
		id INTEGER PRIMARY KEY, seq INTEGER NOT NULL, queue_id INTEGER NOT NULL, partition_id INTEGER NOT NULL,
		group_id INTEGER NOT NULL, error TEXT NOT NULL, retry_count INTEGER NOT NULL, failed_at INTEGER NOT NULL,
		transaction_id TEXT NOT NULL DEFAULT '', UNIQUE (seq, group_id)) STRICT`,
	`INSERT INTO dead_letters_old SELECT id, seq, queue_id, partition_id, group_id, error, retry_count, failed_at, transaction_id FROM dead_letters`,
	`DROP TABLE dead_letters`,
	`ALTER TABLE dead_letters_old RENAME TO dead_letters`,
	`CREATE INDEX dead_letters_failed ON dead_letters (failed_at DESC, id DESC)`,
	`CREATE INDEX dead_letters_queue ON dead_letters (queue_id, failed_at DESC, id DESC)`,
	`CREATE INDEX dead_letters_group ON dead_letters (queue_id, group_id, failed_at DESC, id DESC)`,
	`CREATE INDEX dead_letters_transaction ON dead_letters (transaction_id, failed_at DESC, id DESC)`,
	`DELETE FROM sqlite_sequence WHERE name = 'dead_letters'`,
}

// Migration 0013 rebuilds dead_letters with AUTOINCREMENT: the rows, their
// ids and every index are kept, and the ids go on above the highest ever
// given, also when the highest rows were deleted before the migration
// (they had been given again before it: a bulk action's bound would have
// taken the newcomers for counted rows).
func TestDeadLetterIDsAreNeverReusedAfterMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	w := d.WriteDB()
	// The old table, with the columns later migrations add (which 0013
	// does not know; they are added again after it).
	for _, stmt := range append(preAutoincrement, laterDeadLetterColumns...) {
		if _, err := w.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	for i := range 5 {
		push(t, b, "p", fmt.Sprintf("m%d", i))
	}
	if _, ids := popAck(t, b, "g", broker.AckDLQ); len(ids) != 5 {
		t.Fatalf("dead-lettered %v, want 5", ids)
	}
	dead := func() []broker.DeadLetter {
		t.Helper()
		page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return page.Items
	}
	before := dead()
	oldMax := before[0].ID
	for _, dl := range before {
		oldMax = max(oldMax, dl.ID)
	}
	// The two newest go: under the old schema the next id would be one of theirs.
	if _, err := b.DeleteIDs(ctx, []string{before[0].MessageID(), before[1].MessageID()}, "", "test"); err != nil {
		t.Fatal(err)
	}
	// The table's shape (columns, strictness) and every index's (its
	// columns, order, uniqueness), as SQLite reports them.
	readSchema := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		describe := func(name, query string, args ...any) {
			t.Helper()
			rows, err := w.QueryContext(ctx, query, args...)
			if err != nil {
				t.Fatalf("%s: %v", query, err)
			}
			defer rows.Close()
			cols, err := rows.Columns()
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				out[name] += fmt.Sprintln(vals...)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		describe("table", `SELECT type, ncol, strict FROM pragma_table_list('dead_letters')`)
		describe("columns", `SELECT cid, name, type, "notnull", dflt_value, pk, hidden FROM pragma_table_xinfo('dead_letters') ORDER BY cid`)
		describe("indexes", `SELECT name, "unique", origin, partial FROM pragma_index_list('dead_letters') ORDER BY name`)
		rows, err := w.QueryContext(ctx, `SELECT name FROM pragma_index_list('dead_letters') ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
		rows.Close()
		for _, name := range names {
			describe("index "+name, `SELECT seqno, cid, name, "desc", coll, "key" FROM pragma_index_xinfo(?) ORDER BY seqno`, name)
		}
		return out
	}
	schema := readSchema()

	reapply(t, d, 13, "0013_dead_letter_ids_autoincrement.sql")
	reapplyLaterDeadLetterMigrations(t, d)

	var sql string
	if err := w.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'dead_letters'`).Scan(&sql); err != nil || !strings.Contains(sql, "AUTOINCREMENT") {
		t.Fatalf("dead_letters after the migration: %s, %v", sql, err)
	}
	if after := readSchema(); !maps.Equal(after, schema) {
		for name := range schema {
			if after[name] != schema[name] {
				t.Errorf("%s after the migration:\n%s\nbefore:\n%s", name, after[name], schema[name])
			}
		}
		t.Fatalf("the migration changed the table's shape: after %v", after)
	}
	kept := dead()
	if len(kept) != 3 {
		t.Fatalf("%d dead letters after the migration, want 3", len(kept))
	}
	for i, dl := range kept {
		if dl.ID != before[i+2].ID || dl.TransactionID != before[i+2].TransactionID || dl.Error != "boom" {
			t.Fatalf("after the migration %+v, before %+v", dl, before[i+2])
		}
	}
	var n int
	if err := w.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_integrity_check WHERE integrity_check <> 'ok'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("integrity check: %d problems, %v", n, err)
	}

	// A new dead letter takes an id above every one ever given; so does
	// one after the newest rows are gone again.
	push(t, b, "p", "late")
	if _, ids := popAck(t, b, "g", broker.AckDLQ); len(ids) != 1 {
		t.Fatalf("dead-lettered %v, want the late one", ids)
	}
	late := dead()[0]
	if late.TransactionID != "late" || late.ID <= oldMax {
		t.Fatalf("the late dead letter %s has id %d, want one above %d", late.TransactionID, late.ID, oldMax)
	}
	if _, err := b.DeleteIDs(ctx, []string{late.MessageID()}, "", "test"); err != nil {
		t.Fatal(err)
	}
	push(t, b, "p", "later")
	popAck(t, b, "g", broker.AckDLQ)
	if later := dead()[0]; later.TransactionID != "later" || later.ID <= late.ID {
		t.Fatalf("the next dead letter %s has id %d, want one above %d", later.TransactionID, later.ID, late.ID)
	}
}

// A migration that rewrites a big table leaves no write-ahead log of that
// size behind: the first start after an upgrade truncates it.
func TestMigratingTruncatesTheWriteAheadLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	d, err := Open(ctx, path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := d.WriteDB()
	// 20,000 dead letters in the table as it was before 0013, which
	// then runs again at the next start.
	for _, stmt := range append(preAutoincrement,
		`INSERT INTO dead_letters (seq, queue_id, partition_id, group_id, error, retry_count, failed_at, transaction_id)
			WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
			SELECT i, 1, 1, 1, printf('upstream timeout after %d s: %.60c', i, 'x'), 3, i, printf('order-%d', i) FROM n`,
		`DELETE FROM schema_migrations WHERE version = 13`,
		`PRAGMA main.wal_checkpoint(TRUNCATE)`,
	) {
		if _, err := w.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = Open(ctx, path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var version, rows int
	if err := d.WriteDB().QueryRowContext(ctx, `SELECT MAX(version), (SELECT COUNT(*) FROM dead_letters) FROM schema_migrations`).Scan(&version, &rows); err != nil || version < 13 || rows != 20000 {
		t.Fatalf("after the start: schema version %d, %d dead letters, %v", version, rows, err)
	}
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// The copy of the table alone is over 2 MB; what the start writes
	// after migrating is a few pages.
	if st.Size() > 256<<10 {
		t.Fatalf("the write-ahead log is %d bytes after migrating, want it truncated", st.Size())
	}
}

// Migration 0019 enforces the retention options: a value a queue was
// given while they were kept without being enforced is the value
// enforced, it leaves the kept options, and a queue that never set
// completedRetentionSeconds gets its default of 7 days.
func TestRetentionOptionsKeptBeforeAreEnforcedAfterMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := openBroker(t)
	w := d.WriteDB()
	// Back to the schema before 0019, with what 0011 kept.
	undo := []string{}
	for _, c := range []string{"completed_retention", "retention", "dead_letter_retention"} {
		undo = append(undo, `ALTER TABLE queues DROP COLUMN `+c)
	}
	for _, table := range []string{"group_stats", "stats_minute", "stats_quarter", "stats_hour"} {
		undo = append(undo, `ALTER TABLE `+table+` DROP COLUMN expired`, `ALTER TABLE `+table+` DROP COLUMN dead_letters_expired`)
	}
	undo = append(undo,
		`INSERT INTO queues (name, lease_time, retry_limit, retry_delay, dead_letter_queue, dlq_after_max_retries, created_at, kept_options)
			VALUES ('queen', 300, 3, 1000, 1, 1, 0, '{"completedRetentionSeconds":0,"maxSize":0,"priority":2,"retentionSeconds":86400}'),
			('set', 300, 3, 1000, 1, 1, 0, '{"completedRetentionSeconds":60,"deadLetterRetentionSeconds":3600}'),
			('plain', 300, 3, 1000, 1, 1, 0, '{}')`)
	reapply(t, d, 19, "0019_retention.sql", undo...)

	b := broker.New(broker.Config{Store: d})
	for _, tc := range []struct {
		queue                      string
		completed, any, deadLetter int
		notEnforced                []string
	}{
		{"queen", 0, 86400, 0, []string{"maxSize", "priority"}},
		{"set", 60, 0, 3600, []string{}},
		{"plain", broker.DefaultCompletedRetention, 0, 0, []string{}},
	} {
		q, err := b.Queue(ctx, tc.queue)
		if err != nil {
			t.Fatal(err)
		}
		o := q.Options
		if o.CompletedRetentionSeconds != tc.completed || o.RetentionSeconds != tc.any || o.DeadLetterRetentionSeconds != tc.deadLetter {
			t.Errorf("%s: retention %d, %d, %d; want %d, %d, %d", tc.queue, o.CompletedRetentionSeconds, o.RetentionSeconds, o.DeadLetterRetentionSeconds,
				tc.completed, tc.any, tc.deadLetter)
		}
		if got := o.NotEnforced(); strings.Join(got, ",") != strings.Join(tc.notEnforced, ",") {
			t.Errorf("%s: not enforced %v, want %v", tc.queue, got, tc.notEnforced)
		}
	}
	var n int
	if err := w.QueryRowContext(ctx, `SELECT COUNT(*) FROM group_stats WHERE expired <> 0 OR dead_letters_expired <> 0`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("expired counts after the migration: %d rows not 0, %v", n, err)
	}
}

// Migration 0020 gives the replays made before it what the history needs
// of their originals (push time, transactionId, partition), from the
// messages, so that the history of a message replayed before the upgrade
// still reads once retention (completedRetentionSeconds is on by default)
// removed it.
func TestReplaysAreBackfilledForRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := openBroker(t)
	clk := newManualClock()
	b := broker.New(broker.Config{Store: d, Clock: clk})
	push(t, b, "p", "order-1")
	if _, ids := popAck(t, b, "g", broker.AckDLQ); len(ids) != 1 {
		t.Fatalf("dead-lettered %v", ids)
	}
	page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Limit: 1})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("dead letters %+v, %v", page.Items, err)
	}
	dl := page.Items[0]
	if _, err := b.Replay(ctx, dl.MessageID(), "user:x"); err != nil {
		t.Fatal(err)
	}
	// Back to the schema before 0020, then 0020 again.
	reapply(t, d, 20, "0020_message_retention.sql",
		`DROP INDEX replays_partition`, // 0022's, on a column of 0020
		`ALTER TABLE dead_letters DROP COLUMN payload`, `ALTER TABLE dead_letters DROP COLUMN pushed_at`,
		`ALTER TABLE removed_dead_letters DROP COLUMN payload`, `ALTER TABLE removed_dead_letters DROP COLUMN pushed_at`,
		`DROP TABLE settle_marks`, `ALTER TABLE job_outcomes DROP COLUMN expired`,
		`ALTER TABLE replays DROP COLUMN original_at`, `ALTER TABLE replays DROP COLUMN original_txid`, `ALTER TABLE replays DROP COLUMN partition_id`)
	var at, pid int64
	var txid string
	if err := d.WriteDB().QueryRowContext(ctx, `SELECT original_at, original_txid, partition_id FROM replays WHERE seq = ?`, dl.Seq).Scan(&at, &txid, &pid); err != nil {
		t.Fatal(err)
	}
	if at != dl.CreatedAt.UnixMilli() || txid != "order-1" || pid != dl.PartitionID {
		t.Fatalf("replay after the migration: original_at %d, txid %q, partition %d; want %d, order-1, %d", at, txid, pid, dl.CreatedAt.UnixMilli(), dl.PartitionID)
	}
	// The copy is settled, retention removes both messages: the history
	// of the original still reads, with its replay.
	if _, got := popAck(t, b, "g", broker.AckCompleted); len(got) != 1 {
		t.Fatalf("copy popped: %v", got)
	}
	if _, err := b.Configure(ctx, "q", map[string]json.RawMessage{"retentionSeconds": json.RawMessage("60")}, "test"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if _, err := b.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	var kept int
	if err := d.WriteDB().QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE partition_id > 0`).Scan(&kept); err != nil || kept != 0 {
		t.Fatalf("messages kept after the sweep: %d, %v", kept, err)
	}
	h, err := b.DeadLetterHistory(ctx, dl.MessageID(), "g")
	if err != nil {
		t.Fatalf("history of the original after the sweep: %v", err)
	}
	if len(h.Replays) != 1 {
		t.Fatalf("history replays %+v, want the one", h.Replays)
	}
}

// Migration 0024 enforces retryBackoff, retryDelayMax, maxReplays and
// deadLetterArchive: values kept before carry over, and leave the kept
// options.
func TestBackoffOptionsKeptBeforeAreEnforcedAfterMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := openBroker(t)
	undo := []string{}
	for _, c := range []string{"retry_backoff", "retry_delay_max", "max_replays", "dead_letter_archive"} {
		undo = append(undo, `ALTER TABLE queues DROP COLUMN `+c)
	}
	undo = append(undo,
		`INSERT INTO queues (name, lease_time, retry_limit, retry_delay, dead_letter_queue, dlq_after_max_retries, created_at, kept_options)
			VALUES ('set', 300, 3, 1000, 1, 1, 0, '{"deadLetterArchive":true,"maxReplays":2,"priority":1,"retryBackoff":1.5,"retryDelayMax":9000}'),
			('int', 300, 3, 1000, 1, 1, 0, '{"retryBackoff":3}'),
			('plain', 300, 3, 1000, 1, 1, 0, '{}')`)
	reapply(t, d, 24, "0024_backoff_replays_archive.sql", undo...)
	b := broker.New(broker.Config{Store: d})
	for _, tc := range []struct {
		queue    string
		backoff  float64
		delayMax int
		replays  int
		archive  bool
		kept     string
	}{
		{"set", 1.5, 9000, 2, true, "priority"},
		{"int", 3, broker.DefaultRetryDelayMax, broker.DefaultMaxReplays, false, ""},
		{"plain", 1, broker.DefaultRetryDelayMax, broker.DefaultMaxReplays, false, ""},
	} {
		q, err := b.Queue(ctx, tc.queue)
		if err != nil {
			t.Fatal(err)
		}
		o := q.Options
		if o.RetryBackoff != tc.backoff || o.RetryDelayMax != tc.delayMax || o.MaxReplays != tc.replays || o.DeadLetterArchive != tc.archive {
			t.Errorf("%s: %+v", tc.queue, o)
		}
		var kept []string
		for k := range o.Kept.Values() {
			kept = append(kept, k)
		}
		if strings.Join(kept, ",") != tc.kept {
			t.Errorf("%s: kept %v, want %q", tc.queue, kept, tc.kept)
		}
	}
}

// Migration 0031 records where the subscriptions made before it start
// when that is known: one that started after everything pushed (reads_back
// 0) at the time it subscribed; the others are not known.
func TestSubscriptionStartsAreBackfilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	push(t, b, "p", "order-1")
	for _, r := range []broker.PopRequest{{Queue: "q", Group: "new", Batch: 1, Start: broker.Start{Now: true}}, {Queue: "q", Group: "all", Batch: 1}} {
		if _, err := b.Pop(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	reapply(t, d, 31, "0031_subscription_starts_at.sql", `ALTER TABLE subscriptions DROP COLUMN starts_at`)
	starts := map[string]*int64{}
	rows, err := d.WriteDB().QueryContext(ctx, `SELECT g.name, s.subscribed_at, s.starts_at FROM subscriptions s JOIN groups g ON g.id = s.group_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	at := map[string]int64{}
	for rows.Next() {
		var name string
		var sub int64
		var start *int64
		if err := rows.Scan(&name, &sub, &start); err != nil {
			t.Fatal(err)
		}
		starts[name], at[name] = start, sub
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(starts) != 2 || starts["new"] == nil || *starts["new"] != at["new"] || starts["all"] != nil {
		t.Fatalf("starts after the migration: new %v, all %v (subscribed at %v)", starts["new"], starts["all"], at)
	}
}

// Migration 0041 counts the open and regressed error groups there are.
func TestOpenErrorGroupCountsAreBackfilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, b := openBroker(t)
	for i, e := range []string{"card declined", "gateway timeout", "no such customer"} {
		push(t, b, "p", fmt.Sprintf("order-%d", i))
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: 1})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("pop: %+v %v", res, err)
		}
		m := res.Messages[0]
		if _, err := b.Ack(ctx, broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: e, Group: "g"}); err != nil {
			t.Fatal(err)
		}
	}
	// As the schema before it had them: one open and regressed, one
	// open, one resolved.
	if _, err := d.WriteDB().ExecContext(ctx, `UPDATE error_group_states SET regressed = 1 WHERE fingerprint = 'gateway timeout'`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteDB().ExecContext(ctx, `UPDATE error_group_states SET state = 'resolved' WHERE fingerprint = 'no such customer'`); err != nil {
		t.Fatal(err)
	}
	reapply(t, d, 41, "0041_error_group_open_counts.sql",
		`DROP TRIGGER error_group_open_counts_insert`, `DROP TRIGGER error_group_open_counts_delete`,
		`DROP TRIGGER error_group_open_counts_update`, `DROP TABLE error_group_open_counts`)
	counts, err := b.ErrorGroupCounts(ctx)
	if err != nil || len(counts) != 1 || counts[0] != (broker.ErrorGroupCount{Queue: "q", Open: 2, Regressed: 1}) {
		t.Fatalf("after the migration: %+v %v, want q with 2 open, 1 regressed", counts, err)
	}
}
