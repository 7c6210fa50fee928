package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Set-based statements of the bulk actions: a chunk of dead letters is
// read, copied and removed with a few statements, whatever its size; the
// sets go in as JSON arrays (json_each), payloads never leave SQLite.

// The fingerprint is the one stored when the dead letter was filed, which
// its error group counts it under (the error text itself is not read).
// length() of a BLOB reads its size from the record, not the payload.
// The message may be gone (retention): its time and payload are then
// the dead letter's own (migration 0020).
const deadLetterKeySelect = `SELECT d.id, d.seq, d.queue_id, d.partition_id, d.group_id, COALESCE(m.created_at, d.pushed_at), d.fingerprint,
	COALESCE(length(m.payload), length(d.payload), 0)
	FROM dead_letters d LEFT JOIN messages m ON m.seq = d.seq`

// scanKeys reads the keys a query of deadLetterKeySelect's columns
// returned (rows), or err, the query's.
func scanKeys(rows Rows, err error) ([]broker.DeadLetterKey, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.DeadLetterKey
	for rows.Next() {
		var k broker.DeadLetterKey
		var created int64
		if err := rows.Scan(&k.ID, &k.Seq, &k.QueueID, &k.PartitionID, &k.GroupID, &created, &k.Fingerprint, &k.Size); err != nil {
			return nil, err
		}
		k.CreatedAt = FromMS(created)
		out = append(out, k)
	}
	return out, rows.Err()
}

// KeySelect is DeadLetterKeys' columns. No message joined: a delete
// needs no message's time (CreatedAt 0).
const KeySelect = `SELECT d.id, d.seq, d.queue_id, d.partition_id, d.group_id, 0, d.fingerprint, 0 FROM dead_letters d`

// DeadLetterKeys: a filter with free text or a field filter's words is
// driven by its full-text index (exportPhases, newest docid first, no
// sort: the chunks of a bulk action would else each match and sort the
// whole search again); the others walk the filter's index, newest
// failure first.
func (t *Tx) DeadLetterKeys(ctx context.Context, f broker.Filter, limit int) ([]broker.DeadLetterKey, error) {
	if !f.ByIndex() || f.Floor != nil || f.Window != nil {
		s := deadLetterStmt(dlKeys, f)
		s.Add(dlNewestFirst, limit)
		return scanKeys(t.QueryStmt(ctx, &s))
	}
	var out []broker.DeadLetterKey
	for i, ph := range ExportPhases(f) {
		if i > 0 {
			// The error phase found every row whose error text matches
			// (fewer than limit): the payload phase leaves them out.
			ids := make([]int64, len(out))
			for j, k := range out {
				ids[j] = k.ID
			}
			ph.exceptIDs = IntsJSON(ids)
		}
		s := IndexStmt(ph, 0, limit-len(out))
		keys, err := scanKeys(t.QueryStmt(ctx, &s))
		if err != nil {
			return nil, err
		}
		if out = append(out, keys...); len(out) >= limit {
			break
		}
	}
	return out, nil
}

// The head and end of DrawDeadLetterKeys' statement: the filter's rows
// numbered newest failure first (0-based), those at the ranks asked.
const (
	dlRankedHead Frag = `SELECT id, seq, queue_id, partition_id, group_id, 0, fingerprint, 0 FROM (SELECT d.id, d.seq, d.queue_id, d.partition_id, d.group_id, d.fingerprint,
		ROW_NUMBER() OVER (ORDER BY d.failed_at DESC, d.id DESC) - 1 AS rnk FROM dead_letters d`
	dlRankedEnd Frag = `) x WHERE rnk IN (SELECT value FROM json_each(?)) ORDER BY rnk`
)

// DrawDeadLetterKeys reads the keys at d.Ranks of d.Filter's rows,
// newest failure first: one statement that numbers the filter's rows
// (a walk of its index) and keeps those ranked.
func (t *Tx) DrawDeadLetterKeys(ctx context.Context, d broker.DrawKeys) ([]broker.DeadLetterKey, error) {
	if len(d.Ranks) == 0 {
		return nil, nil
	}
	s := deadLetterStmt(dlRankedHead, d.Filter)
	s.Add(dlRankedEnd, IntsJSON(d.Ranks))
	return scanKeys(t.QueryStmt(ctx, &s))
}

// NewestFailure reads the first row of where(f), newest failure first.
func (t *Tx) NewestFailure(ctx context.Context, f broker.Filter) (time.Time, bool, error) {
	s := deadLetterStmt(dlNewestFailure, f)
	s.Add(dlFirst)
	var at int64
	err := t.QueryRowStmt(ctx, &s).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	return FromMS(at), err == nil, err
}

// CountDeadLettersAbove runs CountAboveStmt.
func (t *Tx) CountDeadLettersAbove(ctx context.Context, f broker.Filter, b broker.Bound, exceptJob int64) (int64, error) {
	s := CountAboveStmt(f, b, exceptJob)
	var n int64
	err := t.QueryRowStmt(ctx, &s).Scan(&n)
	return n, err
}

// CountAboveStmt is the statement of CountDeadLettersAbove: the dead letters of
// f with a row id above b.ID, which migration 0013 made the ones filed
// after b was taken (AUTOINCREMENT: an id is never given twice). They are
// the newest row ids, a short range whatever the clock did: the LIMIT
// keeps SQLite from flattening the subquery into the count, where it would
// walk the filter's index through every older row instead.
func CountAboveStmt(f broker.Filter, b broker.Bound, exceptJob int64) Stmt {
	f.MaxID, f.MaxFailedAt = 0, time.Time{}
	var s Stmt
	s.Add(dlAbove, b.ID)
	if exceptJob != 0 {
		// Not the job's own copies (a probe of replays' primary key each).
		s.Add(dlAboveNotOfJob, exceptJob)
	}
	s.Add(dlAboveEnd)
	AddWhere(&s, f, false)
	return s
}

// The fragments of CountAboveStmt, DeadLetterKeys, NewestFailure and
// CountDeadLetterMessages.
const (
	dlAbove         Frag = `SELECT COUNT(*) FROM (SELECT * FROM dead_letters WHERE id > ?`
	dlAboveNotOfJob Frag = ` AND NOT EXISTS (SELECT 1 FROM replays r WHERE r.copy_seq = dead_letters.seq AND r.job_id = ?)`
	dlAboveEnd      Frag = ` ORDER BY id LIMIT -1) d`
	dlKeys          Frag = KeySelect
	dlNewestFailure Frag = `SELECT d.failed_at FROM dead_letters d`
	dlFirst         Frag = ` ORDER BY d.failed_at DESC, d.id DESC LIMIT 1`
	dlCountMessages Frag = `SELECT COUNT(DISTINCT d.seq) FROM dead_letters d`
)

// CountDeadLetterMessages counts the distinct seqs of what f selects. A
// group's dead letters are one a message (UNIQUE (seq, group_id)): with a
// group the rows are the messages, counted on the group's index.
func (t *Tx) CountDeadLetterMessages(ctx context.Context, f broker.Filter) (int64, error) {
	if f.GroupID != 0 {
		return t.CountDeadLetters(ctx, f)
	}
	s := deadLetterStmt(dlCountMessages, f)
	var n int64
	err := t.QueryRowStmt(ctx, &s).Scan(&n)
	return n, err
}

// DeadLetterKeysOf reads dead_letters by UNIQUE(seq, group_id) for each
// seq, with the message's time and payload size (deadLetterKeySelect).
func (t *Tx) DeadLetterKeysOf(ctx context.Context, seqs []int64) ([]broker.DeadLetterKey, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	return scanKeys(t.Query(ctx, deadLetterKeySelect+` WHERE d.seq IN (SELECT value FROM json_each(?)) ORDER BY d.seq, d.id`, IntsJSON(seqs)))
}

// PushCopies writes messages (one a copy, ON CONFLICT of
// UNIQUE(partition_id, transaction_id) nothing), each copy's payload,
// partition and traceId read from its message by primary key, or once
// retention removed it from a dead letter of it that kept the payload
// (UNIQUE(seq, group_id)); an edited copy takes its own payload and is
// written alone, with replay_edits. Then replays, a row a copy
// inserted, with the original's push time, transactionId and partition
// (from the message or that dead letter), and its depth along the dlq:
// chain (one more than its original's row, by the primary key; 1 when
// the original is no copy). A copy whose transactionId
// the partition has is read back by that index (not Inserted).
//
// The copies go in in cs's order, whatever the mix: cs is taken in runs,
// an edited copy a run of its own, the plain copies between two edited
// ones one run, set-based (a call of plain copies only is one run, as
// many statements as ever). Each run is recorded in replays before the
// next goes in, and only its own copies.
func (t *Tx) PushCopies(ctx context.Context, cs []broker.Copy, now time.Time, by broker.ReplayBy) error {
	for len(cs) > 0 {
		if cs[0].Payload != nil {
			if err := t.pushEdited(ctx, &cs[0], now, by); err != nil {
				return err
			}
			cs = cs[1:]
			continue
		}
		n := 1
		for n < len(cs) && cs[n].Payload == nil {
			n++
		}
		// run shares cs's array: pushCopies fills in cs's own copies.
		run := cs[:n]
		if err := t.pushCopies(ctx, run, now); err != nil {
			return err
		}
		if err := t.recordReplays(ctx, run, now, by); err != nil {
			return err
		}
		cs = cs[n:]
	}
	return nil
}

// pushCopies inserts the copies of cs (none edited), set-based.
func (t *Tx) pushCopies(ctx context.Context, cs []broker.Copy, now time.Time) error {
	rows := make([][3]any, len(cs))
	for i, c := range cs {
		rows[i] = [3]any{c.Seq, c.TransactionID, c.PartitionID}
	}
	list, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	// The list goes into a temporary table of the writer's connection
	// (in memory, like all temporary storage here), keyed by position:
	// scanning it in key order, the INSERT … SELECT below copies the
	// messages in the order of cs with no sort. A sort would hold the
	// joined rows, payloads and all (a chunk of the largest payloads),
	// and one statement a copy costs a fifth more.
	for _, stmt := range []string{
		createCopiesInSQL,
		`DELETE FROM temp.copies_in`,
	} {
		if _, err := t.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	if _, err := t.Exec(ctx, copiesInSQL, string(list)); err != nil {
		return err
	}
	return t.d.PushCopies(ctx, t, cs, now)
}

// createCopiesInSQL makes pushCopies' table of the copies to make, once
// a connection (PostgreSQL's INTEGER is 32 bits: its seq is BIGINT):
// the message copied, the copy's transactionId and its partition.
var createCopiesInSQL = PGQuery(`CREATE TEMP TABLE IF NOT EXISTS copies_in (k INTEGER PRIMARY KEY, seq INTEGER NOT NULL, txid TEXT NOT NULL, part INTEGER NOT NULL)`,
	`CREATE TEMP TABLE IF NOT EXISTS copies_in (k BIGINT PRIMARY KEY, seq BIGINT NOT NULL, txid TEXT NOT NULL, part BIGINT NOT NULL)`)

// copiesInSQL fills copies_in from a JSON array of [seq, transactionId,
// partition] triples, k the position in it (PostgreSQL's ordinality, from
// 1; only the order matters).
var copiesInSQL = PGQuery(`INSERT INTO temp.copies_in (k, seq, txid, part) SELECT j.key, j.value ->> 0, j.value ->> 1, j.value ->> 2 FROM json_each(?) j`,
	`INSERT INTO pg_temp.copies_in (k, seq, txid, part) SELECT j.k, (j.value ->> 0)::bigint, j.value ->> 1, (j.value ->> 2)::bigint FROM json_array_elements(?::json) WITH ORDINALITY j(value, k)`)

// pushEdited inserts one edited copy, and records it with both payloads.
func (t *Tx) pushEdited(ctx context.Context, c *broker.Copy, now time.Time, by broker.ReplayBy) error {
	n, seq, err := t.Insert(ctx, "seq", `INSERT INTO messages (partition_id, transaction_id, payload, trace_id, created_at)
		SELECT ?1, ?2, ?3, COALESCE((SELECT m.trace_id FROM messages m WHERE m.seq = ?5), `+fromDeadLetter("trace_id", "?5")+`), ?4
		WHERE true ON CONFLICT (partition_id, transaction_id) DO NOTHING`, c.PartitionID, c.TransactionID, c.Payload, MS(now), c.Seq)
	if err != nil {
		return err
	}
	if n == 0 {
		m, err := t.MessageByTransaction(ctx, c.PartitionID, c.TransactionID)
		if err != nil {
			return err
		}
		c.CopySeq, c.CopyCreatedAt, c.Inserted = m.Seq, m.CreatedAt, false
		return nil
	}
	c.CopySeq, c.CopyCreatedAt, c.Inserted = seq, now, true
	t.Pushed(c.PartitionID)
	if err := t.recordReplays(ctx, []broker.Copy{*c}, now, by); err != nil {
		return err
	}
	_, err = t.Exec(ctx, `INSERT INTO replay_edits (copy_seq, original, edited)
		SELECT ?1, COALESCE((SELECT m.payload FROM messages m WHERE m.seq = ?3), `+fromDeadLetter("payload", "?3")+`), ?2`, c.CopySeq, c.Payload, c.Seq)
	return err
}

// InsertCopiesSQL inserts the copies listed in temp.copies_in (its one
// parameter the copies' time), which each dialect's PushCopies runs.
// "WHERE true" lets SQLite tell the ON CONFLICT of the upsert from a
// join's ON. A message retention removed is copied from its dead letter
// (migration 0020; COALESCE reads it only then: fromDeadLetter, written
// out so that the text stays a constant the other packages can extend).
// Each copy goes to its own partition (c.part): its message's, or a
// replay's destination.
const InsertCopiesSQL = `INSERT INTO messages (partition_id, transaction_id, payload, trace_id, created_at)
		SELECT c.part, c.txid,
			COALESCE(m.payload, (SELECT d.payload FROM dead_letters d WHERE d.seq = c.seq AND d.payload IS NOT NULL LIMIT 1)),
			COALESCE(m.trace_id, (SELECT d.trace_id FROM dead_letters d WHERE d.seq = c.seq AND d.payload IS NOT NULL LIMIT 1)), ?
		FROM temp.copies_in c LEFT JOIN messages m ON m.seq = c.seq
		WHERE true ORDER BY c.k
		ON CONFLICT (partition_id, transaction_id) DO NOTHING`

// fromDeadLetter reads a column of the message seq from a dead letter of
// it that holds the message's payload (retention removed the message:
// migration 0020), by UNIQUE(seq, group_id).
func fromDeadLetter(col, seq string) string {
	return `(SELECT d.` + col + ` FROM dead_letters d WHERE d.seq = ` + seq + ` AND d.payload IS NOT NULL LIMIT 1)`
}

// recordReplays writes a row of replays for each copy of cs inserted.
func (t *Tx) recordReplays(ctx context.Context, cs []broker.Copy, now time.Time, by broker.ReplayBy) error {
	rows := make([][4]int64, 0, len(cs))
	for _, c := range cs {
		if c.Inserted {
			rows = append(rows, [4]int64{c.CopySeq, c.Seq, c.GroupID, B2I(c.Payload != nil)})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	list, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	// With what the history needs of the original once retention removed
	// it (migration 0020): from the message, or from its dead letter when
	// the message is gone already.
	// depth (migration 0026): one more than the original's own, when
	// it is a copy itself (by the primary key).
	_, err = t.Exec(ctx, recordReplaysSQL, by.JobID, by.Actor, MS(now), string(list))
	return err
}

// recordReplaysSQL writes replays from a JSON array of [copy_seq, seq,
// group_id, edited] (recordReplays). PostgreSQL reads the array with
// json_array_elements and casts its elements, which ->> gives as text.
var recordReplaysSQL = PGQuery(`INSERT INTO replays (copy_seq, seq, group_id, edited, job_id, actor, at, original_at, original_txid, partition_id, depth)
		SELECT x.copy_seq, x.seq, x.group_id, x.edited, ?, ?, ?,
			COALESCE(m.created_at, `+fromDeadLetter("pushed_at", "x.seq")+`, 0),
			COALESCE(m.transaction_id, `+fromDeadLetter("transaction_id", "x.seq")+`, ''),
			COALESCE(m.partition_id, `+fromDeadLetter("partition_id", "x.seq")+`, 0),
			1 + COALESCE((SELECT p.depth FROM replays p WHERE p.copy_seq = x.seq), 0)
		FROM (SELECT j.value ->> 0 AS copy_seq, j.value ->> 1 AS seq, j.value ->> 2 AS group_id, j.value ->> 3 AS edited FROM json_each(?) j) x
		LEFT JOIN messages m ON m.seq = x.seq`,
	`INSERT INTO replays (copy_seq, seq, group_id, edited, job_id, actor, at, original_at, original_txid, partition_id, depth)
		SELECT x.copy_seq, x.seq, x.group_id, x.edited, ?, ?, ?,
			COALESCE(m.created_at, `+fromDeadLetter("pushed_at", "x.seq")+`, 0),
			COALESCE(m.transaction_id, `+fromDeadLetter("transaction_id", "x.seq")+`, ''),
			COALESCE(m.partition_id, `+fromDeadLetter("partition_id", "x.seq")+`, 0),
			1 + COALESCE((SELECT p.depth FROM replays p WHERE p.copy_seq = x.seq), 0)
		FROM (SELECT (j.value ->> 0)::bigint AS copy_seq, (j.value ->> 1)::bigint AS seq, (j.value ->> 2)::bigint AS group_id, (j.value ->> 3)::bigint AS edited
			FROM json_array_elements(?::json) j(value)) x
		LEFT JOIN messages m ON m.seq = x.seq`)

// ExpectReplayOutcomes inserts the pairs into replay_outcomes ON
// CONFLICT DO NOTHING and, for a job, adds to job_outcomes (an upsert a
// group) the pairs it inserted: a pair noted before, by this job or
// another, pending or settled, is never counted again. On PostgreSQL
// one statement does both, the count read from what the INSERT returned
// (a data-modifying WITH). SQLite has none: the pairs not noted yet
// (each once, however often listed) are counted first, then noted, in
// the same transaction, which no other write runs beside.
func (t *Tx) ExpectReplayOutcomes(ctx context.Context, pairs [][3]int64, jobID int64) error {
	if len(pairs) == 0 {
		return nil
	}
	list, err := json.Marshal(pairs)
	if err != nil {
		return err
	}
	return t.d.ExpectOutcomes(ctx, t, jobID, string(list))
}

// IntsJSON is a JSON array of vs.
func IntsJSON(vs []int64) string {
	b, _ := json.Marshal(vs) // a []int64 always marshals
	return string(b)
}
