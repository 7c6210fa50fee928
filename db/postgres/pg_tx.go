package postgres

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"

	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/lazarus-dlq/lazarus/broker"
)

// pgDialect is the dialect of PostgreSQL's store. locked: the
// transaction takes row locks (pgRowLocks), and InsertMessages runs
// pgInsertLockedSQL rather than pgInsertMessagesSQL.
type pgDialect struct {
	locked bool
}

// pgDialectFor is the dialect of a transaction taking lk.
func pgDialectFor(lk sqlcore.Locks) pgDialect {
	_, locked := lk.(pgRowLocks)
	return pgDialect{locked: locked}
}

// Text is s as PostgreSQL's text can hold it (pgText).
func (pgDialect) Text(s string) string { return pgText(s) }

// Param is PostgreSQL's $n.
func (pgDialect) Param(n int) string { return "$" + strconv.Itoa(n) }

// pgRowLocks are the locks of a PostgreSQL write marked
// broker.UpdateOptions.Concurrent while other processes share the
// database (pg_members.go): it runs beside their writes, and settles
// its conflicts with theirs by row locks.
type pgRowLocks struct{}

// ForUpdate: READ COMMITTED, a row another write changed meanwhile is
// read as that write left it, and tested again against the WHERE.
func (pgRowLocks) ForUpdate() string { return ` FOR UPDATE` }

func (pgRowLocks) LockPartition(ctx context.Context, t *sqlcore.Tx, partitionID int64) error {
	_, err := t.Exec(ctx, `SELECT id FROM partitions WHERE id = ? FOR UPDATE`, partitionID)
	return err
}

func (pgRowLocks) ScanWhole() bool { return true }

// LockDrained keeps only those no other write holds, whose partition no
// push holds, looked at again once locked (clearReadySQL). A push holds
// its partition from before its insert to its commit and marks the
// consumers with ready = 0 only: a mark cleared beside a push in flight
// would not be set again. One that comes later waits for this
// transaction's share of the partition, and marks what it cleared. The
// partition comes first in FROM, so its row is locked first: a consumer
// is not left locked (unreturned) behind a partition that is skipped.
func (pgRowLocks) LockDrained(ctx context.Context, t *sqlcore.Tx, groupID int64, drained []int64) ([]int64, error) {
	return t.QueryIDs(ctx, `SELECT c.partition_id FROM partitions p JOIN consumers c ON c.partition_id = p.id
				WHERE p.id = ANY(?1::bigint[]) AND c.group_id = ?2
				ORDER BY p.id FOR SHARE OF p SKIP LOCKED FOR UPDATE OF c SKIP LOCKED`, drained, groupID)
}

// LockDue locks, of the consumers of the group in the partitions of due
// (found ready by a scan, in its order), the first want that no other
// write holds and that are still ready at now, and returns them as they
// stand once locked (FOR UPDATE SKIP LOCKED tests a row another write
// changed meanwhile as that write left it), with a message past the
// cursor as it stands then (another write may have moved it since the
// scan).
func (pgRowLocks) LockDue(ctx context.Context, t *sqlcore.Tx, groupID int64, due []broker.Consumer, now time.Time, want int) ([]broker.Consumer, error) {
	ready := make([]int64, len(due))
	for i, c := range due {
		ready[i] = c.PartitionID
	}
	return sqlcore.ScanConsumers(t.Query(ctx, `SELECT `+sqlcore.ConsumerCols+` FROM consumers c
		WHERE partition_id = ANY(?1::bigint[]) AND group_id = ?2 AND ready = 1
		AND (lease_id IS NULL OR lease_until <= ?3) AND available_at <= ?3
		AND EXISTS (SELECT 1 FROM messages m WHERE m.partition_id = c.partition_id AND m.seq > c.cursor)
		ORDER BY leased_at, partition_id LIMIT ?4 FOR UPDATE OF c SKIP LOCKED`, ready, groupID, sqlcore.MS(now), want))
}

// pgLater is a write kept by execLater: its PostgreSQL text and
// arguments.
type pgLater struct {
	text string
	args []any
}

// pgWriter is the executor of a write transaction: every statement runs
// on its pgx connection (pg_begin.go), the first with its BEGIN, and
// the writes execLater keeps go with the next round trip.
type pgWriter struct {
	begin *pgBegin
	// later are the writes execLater keeps for the next round trip.
	later []pgLater
}

// ExecLater keeps the write for the next round trip: sent before the
// transaction's next statement, or with its COMMIT when none follows (a
// pop's and an ack's last write): its error is then that statement's,
// or the commit's, and nothing of the transaction commits. The
// transaction's reads see it all the same: none runs before it is sent.
func (w *pgWriter) ExecLater(_ context.Context, query string, args []any) error {
	text, args, err := pgBind(query, args)
	if err != nil {
		return err
	}
	w.later = append(w.later, pgLater{text, args})
	return nil
}

// sendLater sends the writes execLater kept, in one round trip (after
// BEGIN, if it is still to be sent).
func (w *pgWriter) sendLater(ctx context.Context) error {
	if len(w.later) == 0 {
		return nil
	}
	if err := w.begin.now(ctx); err != nil {
		return err
	}
	later := w.later
	w.later = nil
	return pgPipeline(ctx, w.begin.pgc, func(b *pgx.Batch) {
		for _, l := range later {
			b.Queue(l.text, l.args...)
		}
	}, func(r pgx.BatchResults, n int) error {
		for range n {
			if _, err := r.Exec(); err != nil {
				return err
			}
		}
		return nil
	})
}

// statement readies the transaction for its next statement: the writes
// kept are sent first, and first says the statement is to carry the
// transaction's BEGIN (pg_begin.go).
func (w *pgWriter) statement(ctx context.Context) (first bool, err error) {
	if len(w.later) > 0 {
		return false, w.sendLater(ctx)
	}
	return w.begin.first()
}

func (w *pgWriter) Exec(ctx context.Context, query string, args []any) (sql.Result, error) {
	first, err := w.statement(ctx)
	if err != nil {
		return nil, err
	}
	text, args, err := pgBind(query, args)
	if err != nil {
		return nil, err
	}
	if first {
		return w.begin.execFirst(ctx, text, args)
	}
	return w.begin.exec(ctx, text, args)
}

func (w *pgWriter) Query(ctx context.Context, query string, args []any) (sqlcore.Rows, error) {
	first, err := w.statement(ctx)
	if err != nil {
		return nil, err
	}
	text, args, err := pgBind(query, args)
	if err != nil {
		return nil, err
	}
	return w.query(ctx, first, text, args)
}

func (w *pgWriter) QueryStmt(ctx context.Context, s *sqlcore.Stmt) (sqlcore.Rows, error) {
	first, err := w.statement(ctx)
	if err != nil {
		return nil, err
	}
	text, args, err := pgBindStmt(s)
	if err != nil {
		return nil, err
	}
	return w.query(ctx, first, text, args)
}

// query runs text, the transaction's first statement when first.
func (w *pgWriter) query(ctx context.Context, first bool, text string, args []any) (sqlcore.Rows, error) {
	if first {
		return w.begin.queryFirst(ctx, text, args)
	}
	return w.begin.query(ctx, text, args)
}

func (w *pgWriter) QueryRow(ctx context.Context, query string, args []any) sqlcore.Row {
	return pgRowOf(w.Query(ctx, query, args))
}

func (w *pgWriter) QueryRowStmt(ctx context.Context, s *sqlcore.Stmt) sqlcore.Row {
	return pgRowOf(w.QueryStmt(ctx, s))
}

// pgRowOf is the one-row answer of a query's rows, or its error.
func pgRowOf(rows sqlcore.Rows, err error) sqlcore.Row {
	if err != nil {
		return pgRow{err: err}
	}
	return pgRow{rows: rows}
}

func (w *pgWriter) Insert(ctx context.Context, col, query string, args []any) (int64, int64, error) {
	return pgInsertReturning(w.Query(ctx, query+" RETURNING "+col, args))
}

// ExecUnprepared sends BEGIN and the writes kept first: the statement
// goes through database/sql, on the transaction's connection.
func (w *pgWriter) ExecUnprepared(ctx context.Context, query string, args []any) error {
	if err := w.begin.now(ctx); err != nil {
		return err
	}
	if err := w.sendLater(ctx); err != nil {
		return err
	}
	_, err := w.begin.conn.ExecContext(ctx, query, args...)
	return err
}

// pgReader is the executor of a read transaction (View): its statements
// go through database/sql.
type pgReader struct {
	conn *sql.Conn
}

func (r pgReader) Exec(ctx context.Context, query string, args []any) (sql.Result, error) {
	text, args, err := pgBind(query, args)
	if err != nil {
		return nil, err
	}
	return r.conn.ExecContext(ctx, text, args...)
}

func (r pgReader) Query(ctx context.Context, query string, args []any) (sqlcore.Rows, error) {
	text, args, err := pgBind(query, args)
	if err != nil {
		return nil, err
	}
	return r.conn.QueryContext(ctx, text, args...)
}

func (r pgReader) QueryRow(ctx context.Context, query string, args []any) sqlcore.Row {
	text, args, err := pgBind(query, args)
	if err != nil {
		return pgRow{err: err}
	}
	return r.conn.QueryRowContext(ctx, text, args...)
}

func (r pgReader) QueryStmt(ctx context.Context, s *sqlcore.Stmt) (sqlcore.Rows, error) {
	text, args, err := pgBindStmt(s)
	if err != nil {
		return nil, err
	}
	return r.conn.QueryContext(ctx, text, args...)
}

func (r pgReader) QueryRowStmt(ctx context.Context, s *sqlcore.Stmt) sqlcore.Row {
	text, args, err := pgBindStmt(s)
	if err != nil {
		return pgRow{err: err}
	}
	return r.conn.QueryRowContext(ctx, text, args...)
}

func (r pgReader) Insert(ctx context.Context, col, query string, args []any) (int64, int64, error) {
	return pgInsertReturning(r.Query(ctx, query+" RETURNING "+col, args))
}

func (r pgReader) ExecLater(ctx context.Context, query string, args []any) error {
	_, err := r.Exec(ctx, query, args)
	return err
}

func (r pgReader) ExecUnprepared(ctx context.Context, query string, args []any) error {
	_, err := r.conn.ExecContext(ctx, query, args...)
	return err
}

// pgInsertReturning reads the answer of an INSERT … RETURNING col: how
// many rows it inserted and the highest col returned.
func pgInsertReturning(rows sqlcore.Rows, err error) (n, last int64, _ error) {
	if err != nil {
		return 0, 0, err
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, 0, err
		}
		n, last = n+1, max(last, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, 0, err
	}
	return n, last, nil
}

// pgBind is query in PostgreSQL's dialect with its arguments (pgArgs:
// the catalog's text, or errNotCatalogued), a full-text match
// (sqlcore.FTSMatch) bound as a tsquery (pgTsquery): pgx writes a
// pgtype.TextValuer's text, for a parameter of a type it has no codec
// of, as tsquery.
func pgBind(query string, args []any) (string, []any, error) {
	return pgArgs(query, pgMatches(args))
}

// pgBindStmt is pgBind of a composed statement (pgComposedStmt).
func pgBindStmt(s *sqlcore.Stmt) (string, []any, error) {
	st, err := pgComposedStmt(s)
	if err != nil {
		return "", nil, err
	}
	text, args := st.bind(pgMatches(s.Args()))
	return text, args, nil
}

// pgMatches is args with each full-text match (sqlcore.FTSMatch) bound
// as a tsquery (pgTsquery), copied when one is.
func pgMatches(args []any) []any {
	copied := false
	for i, a := range args {
		m, ok := a.(sqlcore.FTSMatch)
		if !ok {
			continue
		}
		if !copied {
			args, copied = slices.Clone(args), true
		}
		args[i] = pgtype.Text{String: pgTsquery(string(m)), Valid: true}
	}
	return args
}

// pgText is an error text or fingerprint as PostgreSQL can hold it: its
// text has no NUL and is UTF-8, so each NUL and each run of bytes that is
// not UTF-8 is U+FFFD (the error is a stranger's, and a failed ack must
// still be recorded). A fingerprint made of the text so changed is the
// fingerprint of the text changed likewise, so an error group stays one.
// SQLite keeps every byte.
func pgText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// ImportSeq is drawn from messages' identity sequence.
func (pgDialect) ImportSeq(ctx context.Context, t *sqlcore.Tx, _ time.Time) (int64, error) {
	var next int64
	err := t.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('messages', 'seq'))`).Scan(&next)
	return next, err
}

// PushCopies runs insert (pushCopies' INSERT of copies_in) on
// PostgreSQL, where a row ON CONFLICT DO NOTHING still draws a seq from
// the identity's sequence, so the seqs inserted cannot be told from
// their count and the highest: they are read back (RETURNING), each
// copy found by its partition and transactionId. A copy not returned was
// pushed before and is looked up by that index (not Inserted).
func (pgDialect) PushCopies(ctx context.Context, t *sqlcore.Tx, cs []broker.Copy, now time.Time) error {
	type key struct {
		partition int64
		txid      string
	}
	rows, err := t.Query(ctx, sqlcore.InsertCopiesSQL+` RETURNING seq, partition_id, transaction_id`, sqlcore.MS(now))
	if err != nil {
		return err
	}
	made := map[key]int64{}
	for rows.Next() {
		var seq int64
		var k key
		if err := rows.Scan(&seq, &k.partition, &k.txid); err != nil {
			rows.Close()
			return err
		}
		made[k] = seq
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if _, err := t.Exec(ctx, `DELETE FROM temp.copies_in`); err != nil {
		return err
	}
	for i := range cs {
		c := &cs[i]
		if seq, ok := made[key{c.PartitionID, c.TransactionID}]; ok {
			c.CopySeq, c.CopyCreatedAt, c.Inserted = seq, now, true
			t.Pushed(c.PartitionID)
			continue
		}
		m, err := t.MessageByTransaction(ctx, c.PartitionID, c.TransactionID)
		if err != nil {
			return err
		}
		c.CopySeq, c.CopyCreatedAt, c.Inserted = m.Seq, m.CreatedAt, false
	}
	return nil
}

// ExpectOutcomes is ExpectReplayOutcomes on PostgreSQL: one statement.
func (pgDialect) ExpectOutcomes(ctx context.Context, t *sqlcore.Tx, jobID int64, list string) error {
	_, err := t.Exec(ctx, pgExpectOutcomesSQL, jobID, list)
	return err
}

// The heads of BlockStmt on PostgreSQL, whose json_each reads objects
// only: the array's elements numbered in their order (k.key, as
// SQLite's json_each numbers them), each joined to its dead letters by
// id (the error texts' index) or seq.
const (
	pgBlockOfErrors sqlcore.Frag = sqlcore.DeadLetterCols +
		`json_array_elements_text(CAST(? AS json)) WITH ORDINALITY k(value, key) JOIN dead_letters d ON d.id = CAST(k.value AS BIGINT)` + sqlcore.DeadLetterJoins
	pgBlockOfPayloads sqlcore.Frag = sqlcore.DeadLetterCols +
		`json_array_elements_text(CAST(? AS json)) WITH ORDINALITY k(value, key) JOIN dead_letters d ON d.seq = CAST(k.value AS BIGINT)` + sqlcore.DeadLetterJoins
)

func (pgDialect) BlockStmt(ph sqlcore.ExportPhase, docids []int64, limit int) sqlcore.Stmt {
	head := pgBlockOfErrors
	if ph.Payloads() {
		head = pgBlockOfPayloads
	}
	return sqlcore.BlockStmt(head, ph, docids, limit)
}

// NewestSeq is 0: PostgreSQL's seqs keep growing by themselves.
func (pgDialect) NewestSeq(context.Context, *sqlcore.Tx) (int64, error) { return 0, nil }

// KeepSeqFloor writes nothing on PostgreSQL (see sqlcore.Tx.KeepSeqFloor).
func (pgDialect) KeepSeqFloor(context.Context, *sqlcore.Tx, int64, int64) error { return nil }

func (pgDialect) HoldsNone(s string) bool {
	return !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0
}

// StepSeriesSQL is Series' query of a step of several buckets on
// PostgreSQL, which has no bare columns beside an aggregate: the last
// bucket's depth and oldest_at are the first of each step's buckets
// newest first; its sums are numeric, cast back. A constant for each
// table of buckets.
func (pgDialect) StepSeriesSQL(table string) string {
	switch table {
	case "stats_minute":
		return pgStepSeriesSQL("b.minute", "stats_minute")
	case "stats_quarter":
		return pgStepSeriesSQL("b.quarter", "stats_quarter")
	case "stats_hour":
		return pgStepSeriesSQL("b.hour", "stats_hour")
	}
	return ""
}

// pgStepSeriesSQL is StepSeriesSQL of table, whose time column is u.
func pgStepSeriesSQL(u, table string) string {
	return `SELECT b.queue_id, b.group_id, ?2 + (` + u + ` - ?2) / ?4 * ?4 AS step,
			SUM(b.dead_lettered)::bigint, SUM(b.replayed)::bigint, SUM(b.deleted)::bigint, SUM(b.dropped)::bigint, SUM(b.completed)::bigint,
			SUM(b.failed)::bigint, SUM(b.replay_completed)::bigint, SUM(b.replay_failed)::bigint, SUM(b.expired)::bigint, SUM(b.dead_letters_expired)::bigint,
			MAX(` + u + `), (array_agg(b.depth ORDER BY ` + u + ` DESC))[1], (array_agg(b.oldest_at ORDER BY ` + u + ` DESC))[1] FROM group_stats p
			JOIN ` + table + ` b ON b.queue_id = p.queue_id AND b.group_id = p.group_id AND ` + u + ` >= ?2 AND ` + u + ` < ?3
			WHERE ?1 = 0 OR p.queue_id = ?1 GROUP BY b.queue_id, b.group_id, step`
}

// pgExpectOutcomesSQL is ExpectReplayOutcomes' statement on PostgreSQL,
// over a JSON array of [copy_seq, group_id, error group] triples (the
// error group may be left out: 0), which it reads with
// json_array_elements, casting the elements (->> gives them as text); it
// counts for a job only (job 0 is a single replay).
const pgExpectOutcomesSQL = `WITH noted AS (
			INSERT INTO replay_outcomes (copy_seq, group_id, job_id, error_group)
			SELECT (j.value ->> 0)::bigint, (j.value ->> 1)::bigint, ?1::bigint, COALESCE((j.value ->> 2)::bigint, 0) FROM json_array_elements(?2::json) j(value)
			ON CONFLICT DO NOTHING
			RETURNING group_id)
		INSERT INTO job_outcomes (job_id, group_id, replayed)
		SELECT ?1::bigint, n.group_id, COUNT(*) FROM noted n WHERE ?1::bigint <> 0 GROUP BY n.group_id
		ON CONFLICT (job_id, group_id) DO UPDATE SET replayed = job_outcomes.replayed + excluded.replayed`
