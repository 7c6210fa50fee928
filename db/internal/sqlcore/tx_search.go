package sqlcore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lazarus-dlq/lazarus/broker"
)

// The header search's lookups (broker.SearchTx): each one an index
// search, none a scan of messages or dead_letters (plan checks in
// tx_search_test.go). They read only; they lock nothing beyond the read
// transaction's snapshot, and find nothing as an empty list.

// messageHeadCols are a message's columns but its payload.
const messageHeadCols = `m.seq, m.partition_id, m.transaction_id, m.trace_id, m.created_at`

func scanMessageHeads(rows Rows) ([]broker.Message, error) {
	defer rows.Close()
	var out []broker.Message
	for rows.Next() {
		var m broker.Message
		var created int64
		if err := rows.Scan(&m.Seq, &m.PartitionID, &m.TransactionID, &m.TraceID, &created); err != nil {
			return nil, err
		}
		m.CreatedAt = FromMS(created)
		out = append(out, m)
	}
	return out, rows.Err()
}

// searchDeadLetterSelect joins a dead letter with its queue, partition and
// group, and its message's creation time (for its id: the dead letter's
// own once retention removed the message, migration 0020); no payload,
// and at most broker.SearchErrorBytes of the error text.
var searchDeadLetterSelect = fmt.Sprintf(`SELECT d.id, d.seq, d.queue_id, q.name, d.partition_id, p.name, p.uuid, d.group_id, g.name,
	substr(d.error, 1, %d), d.retry_count, d.failed_at, d.transaction_id, d.trace_id, COALESCE(m.created_at, d.pushed_at)
	FROM dead_letters d
	LEFT JOIN messages m ON m.seq = d.seq
	JOIN queues q ON q.id = d.queue_id
	JOIN partitions p ON p.id = d.partition_id
	JOIN groups g ON g.id = d.group_id`, broker.SearchErrorBytes)

func scanSearchDeadLetters(rows Rows) ([]broker.DeadLetter, error) {
	defer rows.Close()
	var out []broker.DeadLetter
	for rows.Next() {
		var d broker.DeadLetter
		var failed, created int64
		if err := rows.Scan(&d.ID, &d.Seq, &d.QueueID, &d.Queue, &d.PartitionID, &d.Partition, &d.PartitionKey, &d.GroupID, &d.Group,
			&d.Error, &d.RetryCount, &failed, &d.TransactionID, &d.TraceID, &created); err != nil {
			return nil, err
		}
		d.FailedAt, d.CreatedAt = FromMS(failed), FromMS(created)
		out = append(out, d)
	}
	return out, rows.Err()
}

// MessageHeads reads the messages rows of seqs (primary key), without
// their payloads; seqs that are not there are left out.
func (t *Tx) MessageHeads(ctx context.Context, seqs []int64) ([]broker.Message, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	rows, err := t.Query(ctx, MessageHeadsQuery, IntsJSON(seqs))
	if err != nil {
		return nil, err
	}
	return scanMessageHeads(rows)
}

const MessageHeadsQuery = `SELECT ` + messageHeadCols + ` FROM messages m WHERE m.seq IN (SELECT value FROM json_each(?)) ORDER BY m.seq`

// FirstSeqQuery is the first message at or after a seq: one search of the
// primary key.
const FirstSeqQuery = `SELECT seq, created_at FROM messages WHERE seq >= ? ORDER BY seq LIMIT 1`

// seqBoundary returns the lowest seq x such that every message below x
// was created before at and none at or above x was: a binary search
// over seq, one primary-key search a step (about 2·log2(seqs) of them),
// which counts on created_at growing with seq (one writer takes both
// from the same clock; a clock set back breaks it, and the search may
// then miss messages of that time, never return others: the caller
// checks what it finds).
func (t *Tx) seqBoundary(ctx context.Context, at int64, maxSeq int64) (int64, error) {
	return t.seqBoundaryBy(ctx, FirstSeqQuery, at, maxSeq)
}

// seqBoundaryBy is seqBoundary over the rows of first (a query of the
// first row at or after a seq: its seq and push time).
func (t *Tx) seqBoundaryBy(ctx context.Context, first string, at int64, maxSeq int64) (int64, error) {
	lo, hi := int64(1), maxSeq+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		var seq, created int64
		err := t.QueryRow(ctx, first, mid).Scan(&seq, &created)
		if err == sql.ErrNoRows || (err == nil && created >= at) {
			hi = mid
			continue
		}
		if err != nil {
			return 0, err
		}
		lo = seq + 1
	}
	return lo, nil
}

// MessagesByShortID finds the seqs of the messages created in [from, to]
// by binary search (seqBoundary), steps through those of them with the
// low 16 bits, newest first, and reads those rows by primary key: no
// index but the primary key, whatever the table's size.
func (t *Tx) MessagesByShortID(ctx context.Context, from, to time.Time, low uint16, limit int) ([]broker.Message, error) {
	var maxSeq int64
	if err := t.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM messages`).Scan(&maxSeq); err != nil {
		return nil, err
	}
	first, err := t.seqBoundary(ctx, MS(from), maxSeq)
	if err != nil {
		return nil, err
	}
	end, err := t.seqBoundary(ctx, to.UnixMilli()+1, maxSeq)
	if err != nil {
		return nil, err
	}
	ms, err := t.MessageHeads(ctx, shortIDSeqs(first, end, low, limit))
	if err != nil {
		return nil, err
	}
	out := make([]broker.Message, 0, len(ms))
	for i := len(ms) - 1; i >= 0; i-- { // newest first
		if m := ms[i]; !m.CreatedAt.Before(from) && !m.CreatedAt.After(to) {
			out = append(out, m)
		}
	}
	return out, nil
}

// shortIDSeqs returns, newest first, up to limit seqs in [first, end)
// whose low 16 bits are low: the last below end, then every 65,536th.
func shortIDSeqs(first, end int64, low uint16, limit int) []int64 {
	var seqs []int64
	for s := (end-1)&^0xFFFF | int64(low); len(seqs) < limit; s -= 1 << 16 {
		if s >= end {
			continue
		}
		if s < first || s < 1 {
			break
		}
		seqs = append(seqs, s)
	}
	return seqs
}

// FirstDeadLetterSeqQuery is the first dead letter at or after a seq,
// with its message's push time (its own once retention removed the
// message): one search of dead_letters' (seq, group_id) index and one of
// messages' primary key.
const FirstDeadLetterSeqQuery = `SELECT d.seq, COALESCE(m.created_at, d.pushed_at) FROM dead_letters d
	LEFT JOIN messages m ON m.seq = d.seq WHERE d.seq >= ? ORDER BY d.seq LIMIT 1`

// MaxDeadLetterSeqQuery is the highest dead letter's seq: the last
// entry of dead_letters' (seq, group_id) index.
const MaxDeadLetterSeqQuery = `SELECT COALESCE(MAX(seq), 0) FROM dead_letters`

// DeadLettersByShortID is MessagesByShortID over the dead letters, for
// those whose message retention removed: it finds the seqs of the dead
// letters whose messages were pushed in [from, to] by binary search of
// dead_letters' (seq, group_id) index (dead letters keep their
// messages' seqs and push times, which grow together), steps through
// those of them with the low 16 bits, newest first, and reads their
// dead letters by that index (DeadLettersOfSeqs). It reads dead_letters
// and messages (by primary key), locks nothing, and answers none found
// with an empty list.
func (t *Tx) DeadLettersByShortID(ctx context.Context, from, to time.Time, low uint16, limit int) ([]broker.DeadLetter, error) {
	var maxSeq int64
	if err := t.QueryRow(ctx, MaxDeadLetterSeqQuery).Scan(&maxSeq); err != nil {
		return nil, err
	}
	first, err := t.seqBoundaryBy(ctx, FirstDeadLetterSeqQuery, MS(from), maxSeq)
	if err != nil {
		return nil, err
	}
	end, err := t.seqBoundaryBy(ctx, FirstDeadLetterSeqQuery, to.UnixMilli()+1, maxSeq)
	if err != nil {
		return nil, err
	}
	dls, err := t.DeadLettersOfSeqs(ctx, shortIDSeqs(first, end, low, limit), limit)
	if err != nil {
		return nil, err
	}
	out := dls[:0]
	for _, d := range dls {
		if !d.CreatedAt.Before(from) && !d.CreatedAt.After(to) {
			out = append(out, d)
		}
	}
	return out, nil
}

// prefixEnd is the least string above every string that starts with p
// (bytewise, as SQLite's BINARY collation compares, and PostgreSQL's C
// collation): for UTF-8 p, p with its last character one up, itself
// UTF-8 (PostgreSQL takes no other text) and selecting the same UTF-8
// strings as the last byte one up would; else p with its last byte one
// up. UTF-8's bytes are below 0xFF.
func prefixEnd(p string) string {
	if utf8.ValidString(p) {
		r := []rune(p)
		for i := len(r) - 1; i >= 0; i-- {
			if r[i] < unicode.MaxRune {
				if r[i]++; r[i] == 0xD800 {
					r[i] = 0xE000 // surrogates are no characters
				}
				return string(r[:i+1])
			}
		}
	}
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xFF {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\xff\xff\xff\xff" // not reached for UTF-8
}

// holdsNone reports whether t's store can hold no text s: PostgreSQL's
// text is UTF-8 without NUL, so no row there has any other, and a search
// for it finds nothing (its parameter would be an error).
func (t *Tx) holdsNone(s string) bool { return t.d.HoldsNone(s) }

// MessagesByTransaction searches the unique (partition_id,
// transaction_id) index once per partition (the partitions table is read
// whole: its rows are few and small beside the messages'), so that no
// index is added that every push would pay for. Cost: one index search
// a partition (measured in the report of issue 14).
func (t *Tx) MessagesByTransaction(ctx context.Context, txid string, prefix bool, limit int) ([]broker.Message, error) {
	if t.holdsNone(txid) {
		return nil, nil
	}
	q, args := MessagesByTransactionQuery(txid, prefix, limit)
	rows, err := t.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanMessageHeads(rows)
}

func MessagesByTransactionQuery(txid string, prefix bool, limit int) (string, []any) {
	if prefix {
		return `SELECT ` + messageHeadCols + ` FROM partitions p CROSS JOIN messages m
			ON m.partition_id = p.id AND m.transaction_id >= ? AND m.transaction_id < ? LIMIT ?`, []any{txid, prefixEnd(txid), limit}
	}
	return `SELECT ` + messageHeadCols + ` FROM partitions p CROSS JOIN messages m
		ON m.partition_id = p.id AND m.transaction_id = ? LIMIT ?`, []any{txid, limit}
}

// DeadLettersByTransaction searches dead_letters_transaction (migration
// 0008): exact, newest failure first; or the range of the prefix, in
// transactionId order.
func (t *Tx) DeadLettersByTransaction(ctx context.Context, txid string, prefix bool, limit int) ([]broker.DeadLetter, error) {
	if t.holdsNone(txid) {
		return nil, nil
	}
	q, args := DeadLettersByTransactionQuery(txid, prefix, limit)
	rows, err := t.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanSearchDeadLetters(rows)
}

func DeadLettersByTransactionQuery(txid string, prefix bool, limit int) (string, []any) {
	if prefix {
		return searchDeadLetterSelect + ` WHERE d.transaction_id >= ? AND d.transaction_id < ?
			ORDER BY d.transaction_id, d.failed_at DESC, d.id DESC LIMIT ?`, []any{txid, prefixEnd(txid), limit}
	}
	return searchDeadLetterSelect + ` WHERE d.transaction_id = ? ORDER BY d.failed_at DESC, d.id DESC LIMIT ?`, []any{txid, limit}
}

// DeadLettersByTrace searches the partial index dead_letters_trace
// (migration 0016; only dead letters with a traceId are in it, which the
// repeated condition lets SQLite use), newest filed first.
func (t *Tx) DeadLettersByTrace(ctx context.Context, traceID string, limit int) ([]broker.DeadLetter, error) {
	if traceID == "" || t.holdsNone(traceID) {
		return nil, nil
	}
	rows, err := t.Query(ctx, DeadLettersByTraceQuery, traceID, limit)
	if err != nil {
		return nil, err
	}
	return scanSearchDeadLetters(rows)
}

var DeadLettersByTraceQuery = searchDeadLetterSelect + ` WHERE d.trace_id = ? AND d.trace_id <> '' ORDER BY d.id DESC LIMIT ?`

var DeadLettersOfSeqsQuery = searchDeadLetterSelect + ` WHERE d.seq IN (SELECT value FROM json_each(?)) ORDER BY d.seq, d.group_id LIMIT ?`

// DeadLettersOfSeqs searches the (seq, group_id) unique index of
// dead_letters for each seq.
func (t *Tx) DeadLettersOfSeqs(ctx context.Context, seqs []int64, limit int) ([]broker.DeadLetter, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	rows, err := t.Query(ctx, DeadLettersOfSeqsQuery, IntsJSON(seqs), limit)
	if err != nil {
		return nil, err
	}
	return scanSearchDeadLetters(rows)
}

// PartitionConsumers reads the partition's consumers (primary key
// prefix) and their groups' names.
func (t *Tx) PartitionConsumers(ctx context.Context, partitionID int64) ([]broker.NamedConsumer, error) {
	rows, err := t.Query(ctx, `SELECT g.name, `+ConsumerCols+` FROM consumers c JOIN groups g ON g.id = c.group_id
		WHERE c.partition_id = ? ORDER BY g.name`, partitionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.NamedConsumer
	for rows.Next() {
		var nc broker.NamedConsumer
		c, err := scanConsumer(withFirst{rows, &nc.Group})
		if err != nil {
			return nil, err
		}
		nc.Consumer = c
		out = append(out, nc)
	}
	return out, rows.Err()
}

// withFirst is a row whose Scan fills one destination before the
// caller's.
type withFirst struct {
	rows  Rows
	first any
}

func (w withFirst) Scan(dest ...any) error { return w.rows.Scan(append([]any{w.first}, dest...)...) }
