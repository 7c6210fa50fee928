package postgres

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"

	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/lazarus-dlq/lazarus/broker"
)

// dialect is the dialect of PostgreSQL's store. locked: the
// transaction takes row locks (rowLocks), and InsertMessages runs
// insertLockedSQL rather than insertMessagesSQL.
type dialect struct {
	locked bool
}

// dialectFor is the dialect of a transaction taking lk.
func dialectFor(lk sqlcore.Locks) dialect {
	_, locked := lk.(rowLocks)
	return dialect{locked: locked}
}

// Text is s as PostgreSQL's text can hold it (func text, text.go).
func (dialect) Text(s string) string { return text(s) }

// rowLocks are the locks of a PostgreSQL write marked
// broker.UpdateOptions.Concurrent while other processes share the
// database (members.go): it runs beside their writes, and settles
// its conflicts with theirs by row locks.
type rowLocks struct{}

// ForUpdate: READ COMMITTED, a row another write changed meanwhile is
// read as that write left it, and tested again against the WHERE.
func (rowLocks) ForUpdate() string { return ` FOR UPDATE` }

func (rowLocks) LockPartition(ctx context.Context, t *sqlcore.Tx, partitionID int64) error {
	_, err := t.Exec(ctx, `SELECT id FROM partitions WHERE id = ? FOR UPDATE`, partitionID)
	return err
}

func (rowLocks) ScanWhole() bool { return true }

// LockDrained keeps only those no other write holds, whose partition no
// push holds, looked at again once locked (clearReadySQL). A push holds
// its partition from before its insert to its commit and marks the
// consumers with ready = 0 only: a mark cleared beside a push in flight
// would not be set again. One that comes later waits for this
// transaction's share of the partition, and marks what it cleared. The
// partition comes first in FROM, so its row is locked first: a consumer
// is not left locked (unreturned) behind a partition that is skipped.
func (rowLocks) LockDrained(ctx context.Context, t *sqlcore.Tx, groupID int64, drained []int64) ([]int64, error) {
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
func (rowLocks) LockDue(ctx context.Context, t *sqlcore.Tx, groupID int64, due []broker.Consumer, now time.Time, want int) ([]broker.Consumer, error) {
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

// later is what a write transaction sends with its next round trip: a
// write kept by ExecLater, a query kept by queryLater (read reads its
// rows), or the SAVEPOINT of a write of its group (savepoint, group.go),
// its PostgreSQL text and arguments, and owner, the write of the group
// whose it is (writer.member).
type later struct {
	text      string
	args      []any
	owner     int
	savepoint bool
	read      func(pgx.Rows) error
}

// result reads l's answer, the next of r: a kept query's rows go to its
// read, which may fail only for what the server said (the COMMIT may
// follow in the same round trip: a failure the server did not see would
// report a write failed that commits).
func (l later) result(r pgx.BatchResults) error {
	if l.read == nil {
		_, err := r.Exec()
		return err
	}
	rows, err := r.Query()
	if err == nil {
		err = l.read(rows)
	}
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	return err
}

// writer is the executor of a write transaction: every statement runs
// on its pgx connection (begin.go), the first with its BEGIN, and
// the writes execLater keeps go with the next round trip.
type writer struct {
	begin *begin
	// later are what goes with the next round trip, in order.
	later []later
	// member numbers the Update of the transaction's group whose fn runs
	// now (0: the one that began it; -1: none, the group's commit), and
	// last the one whose statement was sent last (group.go). detach: the
	// transaction is shared, so no caller's ctx may cancel a statement
	// of it (pgx closes the connection of a statement it gives up on).
	member, last int
	detach       bool
	// oneTrip: the process writes alone on its database (members.go), so
	// its writer's lock is not contended and a push may keep its insert
	// for the COMMIT's round trip (InsertMessagesLate): the lock's wait
	// then runs under the COMMIT's deadline, not the caller's context.
	oneTrip bool
	// blame, once set, is the failure of an earlier member of the group
	// that a round trip of the member running found (its write kept, or
	// the transaction it left failed): that member's statements fail
	// from there, and the group settles it (group.go).
	blame *blame
}

// ExecLater keeps the write for the next round trip: sent before the
// transaction's next statement, or with its COMMIT when none follows (a
// pop's and an ack's last write): its error is then that statement's,
// or the commit's, and nothing of the transaction commits (of a group,
// nothing of its Update). The transaction's reads see it all the same:
// none runs before it is sent.
func (w *writer) ExecLater(_ context.Context, query string, args []any) error {
	if w.blame != nil {
		return w.blame.rerun()
	}
	text, args, err := bind(query, args)
	if err != nil {
		return err
	}
	w.later = append(w.later, later{text: text, args: args, owner: w.member})
	return nil
}

// queryLater keeps a query for the next round trip, as ExecLater keeps
// a write: read reads its rows when its answer comes, before the
// transaction's next statement answers, or within its COMMIT's round
// trip (so before Update returns). A push is so one round trip
// (InsertMessagesLate).
func (w *writer) queryLater(query string, args []any, read func(pgx.Rows) error) error {
	if w.blame != nil {
		return w.blame.rerun()
	}
	text, args, err := bind(query, args)
	if err != nil {
		return err
	}
	w.later = append(w.later, later{text: text, args: args, owner: w.member, read: read})
	return nil
}

// ctxFor is the context a statement runs under: ctx, or, while the
// transaction is shared by a group, ctx without its cancellation.
func (w *writer) ctxFor(ctx context.Context) context.Context {
	if w.detach {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// pipelined readies the transaction for its next statement and reports
// whether the statement goes in a pipeline, after the BEGIN still to be
// sent or what was kept for the next round trip (with).
func (w *writer) pipelined() (bool, error) {
	if w.blame != nil {
		return false, w.blame.rerun()
	}
	first, err := w.begin.first()
	if err != nil {
		return false, err
	}
	return first || len(w.later) > 0, nil
}

// with sends, in one round trip, BEGIN if it is still to be sent, what
// was kept for the next round trip, and text; it returns the results
// positioned at text's, to be closed by the caller. A kept write that
// fails is its member's failure: the member running's own, or an
// earlier one's (blame).
func (w *writer) with(ctx context.Context, text string, args []any) (pgx.BatchResults, error) {
	var b pgx.Batch
	first := !w.begin.sent
	if first {
		w.begin.queue(&b)
	}
	kept := w.later
	w.later = nil
	for _, l := range kept {
		b.Queue(l.text, l.args...)
	}
	if text != "" {
		b.Queue(text, args...)
	}
	w.begin.wire.add(b.Len())
	last := w.last
	w.last = w.member
	r := w.begin.pgc.SendBatch(ctx, &b)
	if first {
		if err := w.begin.read(r); err != nil {
			r.Close()
			return nil, w.begin.readFailed(err)
		}
	}
	for _, l := range kept {
		if err := l.result(r); err != nil {
			r.Close()
			return nil, w.failed(l, last, err)
		}
	}
	return r, nil
}

// failed is the error of l, sent with a round trip after the statement
// of member last and failing with err: a SAVEPOINT fails only in a
// transaction that an earlier statement failed, last's.
func (w *writer) failed(l later, last int, err error) error {
	owner := l.owner
	if l.savepoint {
		owner = last
	}
	if owner == w.member {
		return err
	}
	w.blame = &blame{member: owner, err: err}
	return w.blame.rerun()
}

// flush sends, in one round trip, BEGIN if it is still to be sent and
// what was kept for the next round trip.
func (w *writer) flush(ctx context.Context) error {
	r, err := w.with(ctx, "", nil)
	if err != nil {
		return err
	}
	return r.Close()
}

func (w *writer) Exec(ctx context.Context, query string, args []any) (sql.Result, error) {
	ctx = w.ctxFor(ctx)
	pipe, err := w.pipelined()
	if err != nil {
		return nil, err
	}
	text, args, err := bind(query, args)
	if err != nil {
		return nil, err
	}
	if !pipe {
		w.last = w.member
		return w.begin.exec(ctx, text, args)
	}
	r, err := w.with(ctx, text, args)
	if err != nil {
		return nil, err
	}
	tag, err := r.Exec()
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return result(tag), nil
}

func (w *writer) Query(ctx context.Context, query string, args []any) (sqlcore.Rows, error) {
	text, args, err := bind(query, args)
	if err != nil {
		return nil, err
	}
	return w.query(ctx, text, args)
}

func (w *writer) QueryStmt(ctx context.Context, s *sqlcore.Stmt) (sqlcore.Rows, error) {
	text, args, err := bindStmt(s)
	if err != nil {
		return nil, err
	}
	return w.query(ctx, text, args)
}

// query runs text: in a pipeline when BEGIN or kept writes go with it.
func (w *writer) query(ctx context.Context, text string, args []any) (sqlcore.Rows, error) {
	ctx = w.ctxFor(ctx)
	pipe, err := w.pipelined()
	if err != nil {
		return nil, err
	}
	if !pipe {
		w.last = w.member
		return w.begin.query(ctx, text, args)
	}
	r, err := w.with(ctx, text, args)
	if err != nil {
		return nil, err
	}
	rows, err := r.Query()
	if err != nil {
		rows.Close()
		r.Close()
		return nil, err
	}
	return &writeRows{rows: rows, results: r}, nil
}

func (w *writer) QueryRow(ctx context.Context, query string, args []any) sqlcore.Row {
	return rowOf(w.Query(ctx, query, args))
}

func (w *writer) QueryRowStmt(ctx context.Context, s *sqlcore.Stmt) sqlcore.Row {
	return rowOf(w.QueryStmt(ctx, s))
}

// rowOf is the one-row answer of a query's rows, or its error.
func rowOf(rows sqlcore.Rows, err error) sqlcore.Row {
	if err != nil {
		return writeRow{err: err}
	}
	return writeRow{rows: rows}
}

func (w *writer) Insert(ctx context.Context, col, query string, args []any) (int64, int64, error) {
	return insertReturning(w.Query(ctx, query+" RETURNING "+col, args))
}

// reader is the executor of a read transaction (View): its statements
// go through database/sql.
type reader struct {
	conn *sql.Conn
}

func (r reader) Exec(ctx context.Context, query string, args []any) (sql.Result, error) {
	text, args, err := bind(query, args)
	if err != nil {
		return nil, err
	}
	return r.conn.ExecContext(ctx, text, args...)
}

func (r reader) Query(ctx context.Context, query string, args []any) (sqlcore.Rows, error) {
	text, args, err := bind(query, args)
	if err != nil {
		return nil, err
	}
	return r.conn.QueryContext(ctx, text, args...)
}

func (r reader) QueryRow(ctx context.Context, query string, args []any) sqlcore.Row {
	text, args, err := bind(query, args)
	if err != nil {
		return writeRow{err: err}
	}
	return r.conn.QueryRowContext(ctx, text, args...)
}

func (r reader) QueryStmt(ctx context.Context, s *sqlcore.Stmt) (sqlcore.Rows, error) {
	text, args, err := bindStmt(s)
	if err != nil {
		return nil, err
	}
	return r.conn.QueryContext(ctx, text, args...)
}

func (r reader) QueryRowStmt(ctx context.Context, s *sqlcore.Stmt) sqlcore.Row {
	text, args, err := bindStmt(s)
	if err != nil {
		return writeRow{err: err}
	}
	return r.conn.QueryRowContext(ctx, text, args...)
}

func (r reader) Insert(ctx context.Context, col, query string, args []any) (int64, int64, error) {
	return insertReturning(r.Query(ctx, query+" RETURNING "+col, args))
}

func (r reader) ExecLater(ctx context.Context, query string, args []any) error {
	_, err := r.Exec(ctx, query, args)
	return err
}

// insertReturning reads the answer of an INSERT … RETURNING col: how
// many rows it inserted and the highest col returned.
func insertReturning(rows sqlcore.Rows, err error) (n, last int64, _ error) {
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

// bind is query in PostgreSQL's dialect with its arguments (textAndArgs:
// the catalog's text, or errNotCatalogued), a full-text match
// (sqlcore.FTSMatch) bound as a tsquery (tsquery): pgx writes a
// pgtype.TextValuer's text, for a parameter of a type it has no codec
// of, as tsquery.
func bind(query string, args []any) (string, []any, error) {
	return textAndArgs(query, matches(args))
}

// bindStmt is bind of a composed statement (composedStmt).
func bindStmt(s *sqlcore.Stmt) (string, []any, error) {
	st, err := composedStmt(s)
	if err != nil {
		return "", nil, err
	}
	text, args := st.bind(matches(s.Args()))
	return text, args, nil
}

// matches is args with each full-text match (sqlcore.FTSMatch) bound
// as a tsquery (tsquery), copied when one is.
func matches(args []any) []any {
	copied := false
	for i, a := range args {
		m, ok := a.(sqlcore.FTSMatch)
		if !ok {
			continue
		}
		if !copied {
			args, copied = slices.Clone(args), true
		}
		args[i] = pgtype.Text{String: tsquery(string(m)), Valid: true}
	}
	return args
}

// text is an error text or fingerprint as PostgreSQL can hold it: its
// text has no NUL and is UTF-8, so each NUL and each run of bytes that is
// not UTF-8 is U+FFFD (the error is a stranger's, and a failed ack must
// still be recorded). A fingerprint made of the text so changed is the
// fingerprint of the text changed likewise, so an error group stays one.
// SQLite keeps every byte.
func text(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// ImportSeq is drawn from messages' identity sequence.
func (dialect) ImportSeq(ctx context.Context, t *sqlcore.Tx, _ time.Time) (int64, error) {
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
func (dialect) PushCopies(ctx context.Context, t *sqlcore.Tx, cs []broker.Copy, now time.Time) error {
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
func (dialect) ExpectOutcomes(ctx context.Context, t *sqlcore.Tx, jobID int64, list string) error {
	_, err := t.Exec(ctx, expectOutcomesSQL, jobID, list)
	return err
}

// The heads of BlockStmt on PostgreSQL, whose json_each reads objects
// only: the array's elements numbered in their order (k.key, as
// SQLite's json_each numbers them), each joined to its dead letters by
// id (the error texts' index) or seq.
const (
	blockOfErrors sqlcore.Frag = sqlcore.DeadLetterCols +
		`json_array_elements_text(CAST(? AS json)) WITH ORDINALITY k(value, key) JOIN dead_letters d ON d.id = CAST(k.value AS BIGINT)` + sqlcore.DeadLetterJoins
	blockOfPayloads sqlcore.Frag = sqlcore.DeadLetterCols +
		`json_array_elements_text(CAST(? AS json)) WITH ORDINALITY k(value, key) JOIN dead_letters d ON d.seq = CAST(k.value AS BIGINT)` + sqlcore.DeadLetterJoins
)

func (dialect) BlockStmt(ph sqlcore.ExportPhase, docids []int64, limit int) sqlcore.Stmt {
	head := blockOfErrors
	if ph.Payloads() {
		head = blockOfPayloads
	}
	return sqlcore.BlockStmt(head, ph, docids, limit)
}

// ReadOnce is fn alone: a PostgreSQL connection keeps no cache of pages
// of its own (the server's shared buffers are bounded by its settings).
func (dialect) ReadOnce(_ context.Context, _ *sqlcore.Tx, fn func() error) error { return fn() }

// NewestSeq is 0: PostgreSQL's seqs keep growing by themselves.
func (dialect) NewestSeq(context.Context, *sqlcore.Tx) (int64, error) { return 0, nil }

// KeepSeqFloor writes nothing on PostgreSQL (see sqlcore.Tx.KeepSeqFloor).
func (dialect) KeepSeqFloor(context.Context, *sqlcore.Tx, int64, int64) error { return nil }

func (dialect) HoldsNone(s string) bool {
	return !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0
}

// StepSeriesSQL is Series' query of a step of several buckets on
// PostgreSQL, which has no bare columns beside an aggregate: the last
// bucket's depth and oldest_at are the first of each step's buckets
// newest first; its sums are numeric, cast back. A constant for each
// table of buckets.
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
			SUM(b.dead_lettered)::bigint, SUM(b.replayed)::bigint, SUM(b.deleted)::bigint, SUM(b.dropped)::bigint, SUM(b.completed)::bigint,
			SUM(b.failed)::bigint, SUM(b.replay_completed)::bigint, SUM(b.replay_failed)::bigint, SUM(b.expired)::bigint, SUM(b.dead_letters_expired)::bigint,
			MAX(` + u + `), (array_agg(b.depth ORDER BY ` + u + ` DESC))[1], (array_agg(b.oldest_at ORDER BY ` + u + ` DESC))[1] FROM group_stats p
			JOIN ` + table + ` b ON b.queue_id = p.queue_id AND b.group_id = p.group_id AND ` + u + ` >= ?2 AND ` + u + ` < ?3
			WHERE ?1 = 0 OR p.queue_id = ?1 GROUP BY b.queue_id, b.group_id, step`
}

// expectOutcomesSQL is ExpectReplayOutcomes' statement on PostgreSQL,
// over a JSON array of [copy_seq, group_id, error group] triples (the
// error group may be left out: 0), which it reads with
// json_array_elements, casting the elements (->> gives them as text); it
// counts for a job only (job 0 is a single replay).
const expectOutcomesSQL = `WITH noted AS (
			INSERT INTO replay_outcomes (copy_seq, group_id, job_id, error_group)
			SELECT (j.value ->> 0)::bigint, (j.value ->> 1)::bigint, ?1::bigint, COALESCE((j.value ->> 2)::bigint, 0) FROM json_array_elements(?2::json) j(value)
			ON CONFLICT DO NOTHING
			RETURNING group_id)
		INSERT INTO job_outcomes (job_id, group_id, replayed)
		SELECT ?1::bigint, n.group_id, COUNT(*) FROM noted n WHERE ?1::bigint <> 0 GROUP BY n.group_id
		ON CONFLICT (job_id, group_id) DO UPDATE SET replayed = job_outcomes.replayed + excluded.replayed`
