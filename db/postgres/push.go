package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// insertMessagesSQL inserts a push's messages, given as one array a
// column, in one statement. The rows go in the arrays' order (ORDER BY
// ordinality): the identity default is drawn for each row as it comes
// out of the sort (the plan's nextval sits above it; PostgreSQL 15 knows
// the ordinality is in order and sorts nothing), so the seqs grow in
// that order, as when inserted one by one. A row whose (partition_id, transaction_id) is there already,
// or came earlier in the same arrays, is not inserted and not returned.
const insertMessagesSQL = `INSERT INTO messages (partition_id, transaction_id, payload, trace_id, created_at)
	SELECT m.partition_id, m.transaction_id, m.payload, m.trace_id, m.created_at
	FROM unnest(?::bigint[], ?::text[], ?::bytea[], ?::text[], ?::bigint[])
		WITH ORDINALITY AS m(partition_id, transaction_id, payload, trace_id, created_at, n)
	ORDER BY m.n
	ON CONFLICT (partition_id, transaction_id) DO NOTHING
	RETURNING seq, partition_id, transaction_id`

// insertLockedSQL is insertMessagesSQL for a shared write
// (broker.UpdateOptions.Concurrent): it first locks the rows of the partitions pushed
// to, in the order of their ids (two pushes to the same partitions wait
// for each other, never in a circle), and holds them to the commit, so
// that a partition's seqs are drawn, and commit, one push after the
// other: a pop never reads past a seq that commits later. The lock is an
// InitPlan of the WHERE, run once before the first row comes out of
// unnest, so before the first seq is drawn; a push that waited for it
// draws its seqs after the one it waited for has committed.
const insertLockedSQL = `INSERT INTO messages (partition_id, transaction_id, payload, trace_id, created_at)
	SELECT m.partition_id, m.transaction_id, m.payload, m.trace_id, m.created_at
	FROM unnest(?1::bigint[], ?2::text[], ?3::bytea[], ?4::text[], ?5::bigint[])
		WITH ORDINALITY AS m(partition_id, transaction_id, payload, trace_id, created_at, n)
	WHERE (SELECT COUNT(*) FROM (SELECT id FROM partitions WHERE id = ANY(?1::bigint[]) ORDER BY id FOR UPDATE) l) >= 0
	ORDER BY m.n
	ON CONFLICT (partition_id, transaction_id) DO NOTHING
	RETURNING seq, partition_id, transaction_id`

// duplicatesSQL reads back the messages of the (partition_id,
// transaction_id) pairs given as two arrays, by that unique index.
const duplicatesSQL = `SELECT ` + sqlcore.MessageCols + ` FROM messages
	WHERE (partition_id, transaction_id) IN (SELECT * FROM unnest(?::bigint[], ?::text[]))`

// messageKey is a message's unique (partition, transactionId).
type messageKey struct {
	partition int64
	txid      string
}

// InsertMessages is InsertMessages on PostgreSQL, where every statement
// is a round trip: one INSERT of every message (insertMessagesSQL,
// or insertLockedSQL for a write that takes row locks), then, when some were not inserted, one query that reads back
// the messages they duplicate (duplicatesSQL).
// Of two messages of one partition with one transactionId, the first is
// inserted and the second reads it back, as InsertMessage one after the
// other would have it.
func (d dialect) InsertMessages(ctx context.Context, t *sqlcore.Tx, msgs []*broker.Message) ([]bool, error) {
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
	rows, err := t.Query(ctx, insert, parts, txids, payloads, traces, created)
	if err != nil {
		return nil, err
	}
	seqs := make(map[messageKey]int64, len(msgs))
	for rows.Next() {
		var seq int64
		var k messageKey
		if err := rows.Scan(&seq, &k.partition, &k.txid); err != nil {
			rows.Close()
			return nil, err
		}
		seqs[k] = seq
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	out := make([]bool, len(msgs))
	var dupParts []int64
	var dupTxids []string
	for i, m := range msgs {
		k := messageKey{m.PartitionID, m.TransactionID}
		seq, ok := seqs[k]
		if !ok {
			dupParts, dupTxids = append(dupParts, k.partition), append(dupTxids, k.txid)
			continue
		}
		// The first message of its key was inserted; a later one of the
		// same key is a duplicate of it.
		delete(seqs, k)
		m.Seq = seq
		t.Pushed(m.PartitionID)
		out[i] = true
	}
	if len(dupParts) == 0 {
		return out, nil
	}
	existing, err := messagesByKey(ctx, t, dupParts, dupTxids)
	if err != nil {
		return nil, err
	}
	for i, m := range msgs {
		if out[i] {
			continue
		}
		e, ok := existing[messageKey{m.PartitionID, m.TransactionID}]
		if !ok {
			return nil, fmt.Errorf("message %q of partition %d: neither inserted nor there", m.TransactionID, m.PartitionID)
		}
		*m = e
	}
	return out, nil
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
