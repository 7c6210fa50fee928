package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// insertMessagesSQL inserts a push's messages, given as one array a
// column, in one statement. The rows go in the arrays' order (ORDER BY
// ordinality): the identity default is drawn for each row as it comes
// out of the sort (the plan's nextval sits above it; PostgreSQL 15 knows
// the ordinality is in order and sorts nothing), so the seqs grow in
// that order, as when inserted one by one. A row whose (partition_id,
// transaction_id) is there already, or came earlier in the same arrays,
// is not inserted.
//
// Its answer is the rows it inserted (new true) and then the messages
// already there of the keys it did not insert (new false, payload
// included): read in the statement's snapshot, which sees none of the
// rows it inserts, nor a row of the same key that another transaction
// committed while this one waited for it (that key is in neither part:
// read again by a statement after, InsertMessages). The keys inserted
// are taken out first (EXCEPT), and each other one is looked up by the
// unique index, a LATERAL subquery with a LIMIT, which the planner
// cannot pull up into a join of its choosing. A first form, the
// messages whose key is IN the keys given, made the pushes slower as
// the table grew (H1's work of 40,000 messages in
// BenchmarkPGGroupCommit took 7× as long; the same run without the
// lookup, as long as before it).
const insertMessagesSQL = insertHead + insertTail

// insertLockedSQL is insertMessagesSQL for a shared write
// (broker.UpdateOptions.Concurrent): it first locks the rows of the partitions pushed
// to, in the order of their ids (two pushes to the same partitions wait
// for each other, never in a circle), and holds them to the commit, so
// that a partition's seqs are drawn, and commit, one push after the
// other: a pop never reads past a seq that commits later. The lock is an
// InitPlan of the WHERE, run once before the first row comes out of
// unnest, so before the first seq is drawn; a push that waited for it
// draws its seqs after the one it waited for has committed.
const insertLockedSQL = insertHead + `
	WHERE (SELECT COUNT(*) FROM (SELECT id FROM partitions WHERE id = ANY(?1::bigint[]) ORDER BY id FOR UPDATE) l) >= 0` + insertTail

const (
	insertHead = `WITH ins AS (INSERT INTO messages (partition_id, transaction_id, payload, trace_id, created_at)
	SELECT m.partition_id, m.transaction_id, m.payload, m.trace_id, m.created_at
	FROM unnest(?1::bigint[], ?2::text[], ?3::bytea[], ?4::text[], ?5::bigint[])
		WITH ORDINALITY AS m(partition_id, transaction_id, payload, trace_id, created_at, n)`
	insertTail = `
	ORDER BY m.n
	ON CONFLICT (partition_id, transaction_id) DO NOTHING
	RETURNING seq, partition_id, transaction_id)
SELECT seq, partition_id, transaction_id, NULL::bytea, ''::text, 0::bigint, true FROM ins
UNION ALL
SELECT m.seq, m.partition_id, m.transaction_id, m.payload, m.trace_id, m.created_at, false
	FROM (SELECT * FROM unnest(?1::bigint[], ?2::text[]) EXCEPT SELECT partition_id, transaction_id FROM ins) k(partition_id, transaction_id)
	CROSS JOIN LATERAL (SELECT * FROM messages x WHERE x.partition_id = k.partition_id AND x.transaction_id = k.transaction_id LIMIT 1) m`
)

// duplicatesSQL reads back the messages of the (partition_id,
// transaction_id) pairs given as two arrays, by that unique index.
const duplicatesSQL = `SELECT ` + sqlcore.MessageCols + ` FROM messages
	WHERE (partition_id, transaction_id) IN (SELECT * FROM unnest(?::bigint[], ?::text[]))`

// messageKey is a message's unique (partition, transactionId).
type messageKey struct {
	partition int64
	txid      string
}

// insertArgs are the insert's arguments for msgs: an array a column.
func (d dialect) insertArgs(msgs []*broker.Message) (string, []any) {
	parts := make([]int64, len(msgs))
	txids := make([]string, len(msgs))
	payloads := make([][]byte, len(msgs))
	traces := make([]string, len(msgs))
	created := make([]int64, len(msgs))
	for i, m := range msgs {
		parts[i], txids[i], payloads[i], traces[i], created[i] = m.PartitionID, m.TransactionID, m.Payload, m.TraceID, sqlcore.MS(m.CreatedAt)
	}
	insert := insertMessagesSQL
	if d.locked {
		insert = insertLockedSQL
	}
	return insert, []any{parts, txids, payloads, traces, created}
}

// insertAnswer is the insert's answer: the seqs it drew, and the
// messages already there, by key.
type insertAnswer struct {
	seqs     map[messageKey]int64
	existing map[messageKey]broker.Message
}

// rowReader is what insertAnswer.read needs of rows: sqlcore's or pgx's.
type rowReader interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// read reads the insert's rows into a.
func (a *insertAnswer) read(rows rowReader, n int) error {
	a.seqs = make(map[messageKey]int64, n)
	for rows.Next() {
		var m broker.Message
		var created int64
		var isNew bool
		if err := rows.Scan(&m.Seq, &m.PartitionID, &m.TransactionID, &m.Payload, &m.TraceID, &created, &isNew); err != nil {
			return err
		}
		k := messageKey{m.PartitionID, m.TransactionID}
		if isNew {
			a.seqs[k] = m.Seq
			continue
		}
		if a.existing == nil {
			a.existing = map[messageKey]broker.Message{}
		}
		m.CreatedAt = sqlcore.FromMS(created)
		a.existing[k] = m
	}
	return rows.Err()
}

// fill sets each message's seq and inserted from a: the first message of
// a key inserted is new, a later one of the same key a duplicate of it,
// one of a key already there filled with that message. It returns the
// indexes of the messages of keys in neither (left as they were).
func (a *insertAnswer) fill(msgs []*broker.Message, inserted []bool) (unknown []int) {
	firsts := make(map[messageKey]*broker.Message, len(a.seqs))
	for i, m := range msgs {
		k := messageKey{m.PartitionID, m.TransactionID}
		inserted[i] = false
		if f, ok := firsts[k]; ok {
			*m = *f // a duplicate of one inserted earlier in msgs
			continue
		}
		if seq, ok := a.seqs[k]; ok {
			// The first message of its key was inserted; a later one of
			// the same key is a duplicate of it.
			m.Seq, inserted[i] = seq, true
			firsts[k] = m
			continue
		}
		if e, ok := a.existing[k]; ok {
			*m = e
			continue
		}
		unknown = append(unknown, i)
	}
	return unknown
}

// InsertMessages is InsertMessages on PostgreSQL, where every statement
// is a round trip: one statement inserts every message and reads back
// those already there (insertMessagesSQL, or insertLockedSQL for a
// write that takes row locks); only a message whose key another
// transaction committed while the insert waited for it is read in a
// second (duplicatesSQL). Of two messages of one partition with one
// transactionId, the first is inserted and the second is a duplicate of
// it, as InsertMessage one after the other would have it.
func (d dialect) InsertMessages(ctx context.Context, t *sqlcore.Tx, msgs []*broker.Message) ([]bool, error) {
	insert, args := d.insertArgs(msgs)
	rows, err := t.Query(ctx, insert, args...)
	if err != nil {
		return nil, err
	}
	var a insertAnswer
	err = a.read(rows, len(msgs))
	if err := errors.Join(err, rows.Close()); err != nil {
		return nil, err
	}
	out := make([]bool, len(msgs))
	unknown := a.fill(msgs, out)
	for i, m := range msgs {
		if out[i] {
			t.Pushed(m.PartitionID)
		}
	}
	if len(unknown) == 0 {
		return out, nil
	}
	parts, txids := make([]int64, len(unknown)), make([]string, len(unknown))
	for j, i := range unknown {
		parts[j], txids[j] = msgs[i].PartitionID, msgs[i].TransactionID
	}
	existing, err := messagesByKey(ctx, t, parts, txids)
	if err != nil {
		return nil, err
	}
	for _, i := range unknown {
		m := msgs[i]
		e, ok := existing[messageKey{m.PartitionID, m.TransactionID}]
		if !ok {
			return nil, fmt.Errorf("message %q of partition %d: neither inserted nor there", m.TransactionID, m.PartitionID)
		}
		*m = e
	}
	return out, nil
}

// InsertMessagesLate is InsertMessagesLate on PostgreSQL: in a write
// of a process alone on its database (writer.oneTrip), the insert is
// kept for the transaction's next round trip (writer.queryLater), so
// that a push's BEGIN, insert, ready mark and COMMIT go in one
// (commit), and msgs and inserted are filled as its answer is read;
// the partitions are marked ready before it is known which messages
// were new. Every message is then either inserted or read back by the
// statement: under the writer's lock held alone nobody else inserts,
// and the insert's snapshot is taken once the lock is held (a key in
// neither part is left with Seq 0, which the broker refuses). Beside
// other processes, InsertMessages at once.
func (d dialect) InsertMessagesLate(ctx context.Context, t *sqlcore.Tx, msgs []*broker.Message, inserted []bool) error {
	w, ok := t.Executor().(*writer)
	if !ok || !w.oneTrip {
		// Beside other processes the writer's lock and the partitions'
		// rows may be waited for: under the caller's context, in the
		// round trip of BEGIN, as every other write's first statement.
		out, err := d.InsertMessages(ctx, t, msgs)
		copy(inserted, out)
		return err
	}
	insert, args := d.insertArgs(msgs)
	for _, m := range msgs {
		t.Pushed(m.PartitionID)
	}
	return w.queryLater(insert, args, func(rows pgx.Rows) error {
		var a insertAnswer
		if err := a.read(rows, len(msgs)); err != nil {
			return err
		}
		a.fill(msgs, inserted)
		return nil
	})
}

// messagesByKey reads the messages of the given (partition,
// transactionId) pairs, payloads included, in one query.
func messagesByKey(ctx context.Context, t *sqlcore.Tx, parts []int64, txids []string) (map[messageKey]broker.Message, error) {
	rows, err := t.Query(ctx, duplicatesSQL, parts, txids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[messageKey]broker.Message, len(parts))
	for rows.Next() {
		m, err := sqlcore.ScanMessage(rows)
		if err != nil {
			return nil, err
		}
		out[messageKey{m.PartitionID, m.TransactionID}] = m
	}
	return out, rows.Err()
}
