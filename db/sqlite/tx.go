package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// dialect is the dialect of SQLite's store: sqlcore.Tx's statements
// run as written. s is the store's search file (nil: none, for tests
// and tools that run statements alone).
type dialect struct{ s *searchIndex }

// Text keeps every byte.
func (dialect) Text(s string) string { return s }

// InsertMessages calls InsertMessage for each message: a statement costs
// no round trip here, and the push's statement stays the one measured.
func (dialect) InsertMessages(ctx context.Context, t *sqlcore.Tx, ms []*broker.Message) ([]bool, error) {
	return t.InsertEach(ctx, ms)
}

// FoldLock folds every row noted: SQLite's one writer holds them all.
func (dialect) FoldLock(_ context.Context, _ *sqlcore.Tx, ids []int64, keys [][2]int64) ([]int64, [][2]int64, sqlcore.FoldLeft, error) {
	return ids, keys, sqlcore.FoldLeft{}, nil
}

// writer is the executor of the writer's transactions: its
// statements run beneath database/sql on the connection held for it,
// kept prepared (rawConn), with no context (see stmt.go).
type writer struct {
	raw  *rawConn
	conn *sql.Conn // the same connection, through database/sql
}

func (w writer) Exec(_ context.Context, query string, args []any) (sql.Result, error) {
	return w.raw.exec(query, args)
}

func (w writer) Query(_ context.Context, query string, args []any) (sqlcore.Rows, error) {
	return w.raw.query(query, args)
}

func (w writer) QueryRow(_ context.Context, query string, args []any) sqlcore.Row {
	rows, err := w.raw.query(query, args)
	return rawRow{rows: rows, err: err}
}

func (w writer) Insert(ctx context.Context, _ string, query string, args []any) (int64, int64, error) {
	return sqlResultInsert(w.Exec(ctx, query, args))
}

func (w writer) ExecLater(ctx context.Context, query string, args []any) error {
	_, err := w.Exec(ctx, query, args)
	return err
}

func (w writer) QueryStmt(ctx context.Context, s *sqlcore.Stmt) (sqlcore.Rows, error) {
	return w.Query(ctx, s.SQL(), s.Args())
}

func (w writer) QueryRowStmt(ctx context.Context, s *sqlcore.Stmt) sqlcore.Row {
	return w.QueryRow(ctx, s.SQL(), s.Args())
}

// reader is the executor of a read transaction (View) on a
// connection of the read pool, whose statements go-sqlite3 keeps
// prepared. No context reaches them: View's one watcher interrupts a
// read that runs long (watchCancel).
type reader struct {
	conn *sql.Conn
}

func (r reader) Exec(_ context.Context, query string, args []any) (sql.Result, error) {
	return r.conn.ExecContext(context.Background(), query, args...)
}

func (r reader) Query(_ context.Context, query string, args []any) (sqlcore.Rows, error) {
	return r.conn.QueryContext(context.Background(), query, args...)
}

func (r reader) QueryRow(_ context.Context, query string, args []any) sqlcore.Row {
	return r.conn.QueryRowContext(context.Background(), query, args...)
}

func (r reader) Insert(ctx context.Context, _ string, query string, args []any) (int64, int64, error) {
	return sqlResultInsert(r.Exec(ctx, query, args))
}

func (r reader) ExecLater(ctx context.Context, query string, args []any) error {
	_, err := r.Exec(ctx, query, args)
	return err
}

func (r reader) QueryStmt(ctx context.Context, s *sqlcore.Stmt) (sqlcore.Rows, error) {
	return r.Query(ctx, s.SQL(), s.Args())
}

func (r reader) QueryRowStmt(ctx context.Context, s *sqlcore.Stmt) sqlcore.Row {
	return r.QueryRow(ctx, s.SQL(), s.Args())
}

// sqlResultInsert is insert over exec, for SQLite's executors: the
// statement's changes and last rowid.
func sqlResultInsert(res sql.Result, err error) (n, last int64, _ error) {
	if err != nil {
		return 0, 0, err
	}
	if n, err = res.RowsAffected(); err != nil {
		return 0, 0, err
	}
	last, err = res.LastInsertId()
	return n, last, err
}

// ImportSeq is one above the highest of messages, the placeholder moved
// one above it.
func (dialect) ImportSeq(ctx context.Context, t *sqlcore.Tx, now time.Time) (int64, error) {
	var top int64
	if err := t.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM messages`).Scan(&top); err != nil {
		return 0, err
	}
	if err := t.KeepSeqFloor(ctx, top+2, sqlcore.MS(now)); err != nil {
		return 0, err
	}
	return top + 1, nil
}

// PushCopies inserts the copies on SQLite: one writer and no
// AUTOINCREMENT, so when every copy went in, their seqs are the last
// len(cs) ones, in that order.
func (dialect) PushCopies(ctx context.Context, t *sqlcore.Tx, cs []broker.Copy, now time.Time) error {
	n, last, err := t.Insert(ctx, "seq", sqlcore.InsertCopiesSQL, sqlcore.MS(now))
	if err != nil {
		return err
	}
	if _, err := t.Exec(ctx, `DELETE FROM temp.copies_in`); err != nil {
		return err
	}
	if n == int64(len(cs)) {
		for i := range cs {
			cs[i].CopySeq, cs[i].CopyCreatedAt, cs[i].Inserted = last-n+1+int64(i), now, true
			t.Pushed(cs[i].PartitionID)
		}
		return nil
	}
	// Some were replayed before: each copy is looked up (those made now
	// carry now as their time).
	for i := range cs {
		c := &cs[i]
		m, err := t.MessageByTransaction(ctx, c.PartitionID, c.TransactionID)
		if err != nil {
			return err
		}
		// LastInsertId is this statement's only when it inserted a row.
		c.CopySeq, c.CopyCreatedAt, c.Inserted = m.Seq, m.CreatedAt, n > 0 && m.Seq > last-n
		if c.Inserted {
			t.Pushed(c.PartitionID)
		}
	}
	return nil
}

// ExpectOutcomes is ExpectReplayOutcomes on SQLite: the pairs not noted
// yet counted first, then noted.
func (dialect) ExpectOutcomes(ctx context.Context, t *sqlcore.Tx, jobID int64, list string) error {
	if jobID != 0 {
		if _, err := t.Exec(ctx, countNewOutcomesSQL, jobID, list); err != nil {
			return err
		}
	}
	_, err := t.Exec(ctx, expectOutcomesSQL, jobID, list)
	return err
}

// blockQuery is the SQL of the rows of docids (newest first) that the
// rest of ph's filter selects, in the docids' order (a message's dead
// letters by row id), up to limit (-1: all): the docids drive (CROSS
// JOIN), each looked up by id or seq; the sort is of the page's rows
// only.
func blockQuery(ph sqlcore.ExportPhase, docids []int64, limit int) (string, []any) {
	s := dialect{}.BlockStmt(ph, docids, limit)
	return s.SQL(), s.Args()
}

// The heads of BlockStmt on SQLite: the docids of a JSON array, each
// joined to its dead letters by id (the error texts' index) or seq.
const (
	blockOfErrors   sqlcore.Frag = sqlcore.DeadLetterCols + `json_each(?) k CROSS JOIN dead_letters d ON d.id = k.value` + sqlcore.DeadLetterJoins
	blockOfPayloads sqlcore.Frag = sqlcore.DeadLetterCols + `json_each(?) k CROSS JOIN dead_letters d ON d.seq = k.value` + sqlcore.DeadLetterJoins
)

func (dialect) BlockStmt(ph sqlcore.ExportPhase, docids []int64, limit int) sqlcore.Stmt {
	head := blockOfErrors
	if ph.Payloads() {
		head = blockOfPayloads
	}
	return sqlcore.BlockStmt(head, ph, docids, limit)
}

// ReadOnce runs fn with a cache of readOnceCacheKiB on the connection,
// and gives it its usual cache (connCacheKiB) again after: lowering the
// size drops the pages cached beyond it, and an export's pages, each
// read once, never fill more than the small one. Measured in bench's S3
// (an export of 1M dead letters): the process's peak RSS was the usual
// cache's 32 MB above what it was before the export.
func (dialect) ReadOnce(ctx context.Context, t *sqlcore.Tx, fn func() error) error {
	return throughSmallCache(ctx, func(ctx context.Context, q string) error {
		_, err := t.Exec(ctx, q)
		return err
	}, "", fn)
}

// NewestSeq is the newest message's seq, for keepSeqFloor.
func (dialect) NewestSeq(ctx context.Context, t *sqlcore.Tx) (int64, error) {
	var top int64
	err := t.QueryRow(ctx, `SELECT MAX(seq) FROM messages`).Scan(&top)
	return top, err
}

// KeepSeqFloor writes or moves the placeholder row.
func (dialect) KeepSeqFloor(ctx context.Context, t *sqlcore.Tx, seq, createdAt int64) error {
	_, err := t.Exec(ctx, `INSERT INTO messages (seq, partition_id, transaction_id, payload, trace_id, created_at) VALUES (?1, 0, '', x'', '', ?2)
		ON CONFLICT (partition_id, transaction_id) DO UPDATE SET seq = excluded.seq, created_at = excluded.created_at WHERE excluded.seq > messages.seq`, seq, createdAt)
	return err
}

func (dialect) HoldsNone(string) bool { return false }

// StepSeriesSQL is Series' query of a step of several buckets, summed by
// SQLite over that range, each step's depth and oldest_at from its last
// bucket (the row of MAX). A constant for each table of buckets.
func (dialect) StepSeriesSQL(table string) string {
	switch table {
	case "stats_minute":
		return stepSeriesSQL("b.minute", "stats_minute")
	case "stats_quarter":
		return stepSeriesSQL("b.quarter", "stats_quarter")
	case "stats_hour":
		return stepSeriesSQL("b.hour", "stats_hour")
	}
	return ""
}

// stepSeriesSQL is StepSeriesSQL of table, whose time column is u.
func stepSeriesSQL(u, table string) string {
	return `SELECT b.queue_id, b.group_id, ?2 + (` + u + ` - ?2) / ?4 * ?4 AS step,
			SUM(b.dead_lettered), SUM(b.replayed), SUM(b.deleted), SUM(b.dropped), SUM(b.completed), SUM(b.failed), SUM(b.replay_completed), SUM(b.replay_failed),
			SUM(b.expired), SUM(b.dead_letters_expired), MAX(` + u + `), b.depth, b.oldest_at FROM group_stats p
			JOIN ` + table + ` b ON b.queue_id = p.queue_id AND b.group_id = p.group_id AND ` + u + ` >= ?2 AND ` + u + ` < ?3
			WHERE ?1 = 0 OR p.queue_id = ?1 GROUP BY b.queue_id, b.group_id, step`
}

// The statements of ExpectReplayOutcomes on SQLite, over a JSON array of
// [copy_seq, group_id, error group] triples (the error group, error_group_states.id,
// may be left out: 0): countNewOutcomesSQL then expectOutcomesSQL.
const (
	countNewOutcomesSQL = `INSERT INTO job_outcomes (job_id, group_id, replayed)
		SELECT ?1, x.group_id, COUNT(*) FROM (SELECT DISTINCT j.value ->> 0 AS copy_seq, j.value ->> 1 AS group_id FROM json_each(?2) j) x
		WHERE NOT EXISTS (SELECT 1 FROM replay_outcomes o WHERE o.copy_seq = x.copy_seq AND o.group_id = x.group_id)
		GROUP BY x.group_id
		ON CONFLICT (job_id, group_id) DO UPDATE SET replayed = job_outcomes.replayed + excluded.replayed`
	expectOutcomesSQL = `INSERT INTO replay_outcomes (copy_seq, group_id, job_id, error_group)
		SELECT j.value ->> 0, j.value ->> 1, ?1, COALESCE(j.value ->> 2, 0) FROM json_each(?2) j WHERE true ON CONFLICT DO NOTHING`
)
