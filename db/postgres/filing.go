package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Filing dead letters on PostgreSQL (broker.Tx.FileDeadLetters): all the
// dead letters of one write in two statements, whatever their number
// (the payloads to index read, then one that writes the rest),
// rather than some nine round trips each (the dead letter, its error
// text's and payload's index rows, a read of the payload, its error
// group, hour and version, each a statement; the broker's funnel and
// audit each another). The rows go as one array a column (unnest, as a
// push's messages do, push.go), and the statement's parts are
// data-modifying CTEs fed by the dead letters it inserted (dl), so one
// whose message its group has a dead letter of already (ON CONFLICT on
// UNIQUE(seq, group_id)) is neither indexed nor counted:
//
//   - dl inserts the dead letters in the arrays' order (ids grow in it),
//     their payload and push time kept only when the message is gone,
//     as InsertDeadLetter keeps them;
//   - e and p index the error texts and the payloads, the words made in
//     Go as IndexDeadLetter makes them; a payload once a message, and
//     not when another group's dead letter of the message has it
//     indexed already (ON CONFLICT on the index's docid, the message's
//     seq: a payload is indexed while a dead letter of its message is
//     there, text.go);
//   - g, h and v count them into their error groups, hours and
//     versions, once a key for all its dead letters (the sample error
//     the newest, the last of the newest as InsertDeadLetter one after
//     the other leaves it).
//
// A write marked Concurrent beside other processes' (rowLocks) takes
// the filing lock first (fileLock, transaction-scoped, exclusive among
// filings only), before dl draws an id: the filings of processes run
// one after the other from there to their commits, so dead letter ids
// commit in their order (broker.DeadLetterTx.MaxDeadLetterID), and the
// error groups' states and the outbox that the broker writes next
// (funnels, events) are written by one filing at a time, as by a write
// that runs alone. Pushes, leases and acks that file nothing never take
// it. The lock is an InitPlan of dl's WHERE, run before the first row
// comes out of unnest, as a push's partition locks are
// (insertLockedSQL); the statement's snapshot is taken before the wait,
// but nothing of it reads what another filing writes but through ON
// CONFLICT, which sees the latest rows, and the broker's later
// statements have snapshots of their own. A write that runs alone
// takes no lock (it holds the writer's lock exclusively).

// fileLock is the key of the filing lock (a transaction-scoped advisory
// lock, beside the writer's lock of store.go).
const fileLock = 0x4c617a61_72757305 // "Lazarus" 5 (3 is the lead's, 4 the members')

// The parts of fileSQL and fileLockedSQL: the arrays, then dl's INSERT
// up to its WHERE, the rest after it.
const (
	fileHead = `WITH u AS (
		SELECT * FROM unnest(?1::bigint[], ?2::bigint[], ?3::bigint[], ?4::bigint[], ?5::text[], ?6::bigint[], ?7::bigint[], ?8::text[],
			?9::bigint[], ?10::text[], ?11::text[], ?12::bytea[], ?13::bigint[], ?14::text[], ?15::text[], ?16::text[])
		WITH ORDINALITY AS u(seq, queue_id, partition_id, group_id, error, retry_count, failed_at, transaction_id,
			error_bytes, fingerprint, trace_id, payload, pushed_at, consumer_version, error_words, payload_words, n)),
	dl AS (
		INSERT INTO dead_letters (seq, queue_id, partition_id, group_id, error, retry_count, failed_at, transaction_id, error_bytes, fingerprint, trace_id, payload, pushed_at, consumer_version)
		SELECT u.seq, u.queue_id, u.partition_id, u.group_id, u.error, u.retry_count, u.failed_at, u.transaction_id, u.error_bytes, u.fingerprint, u.trace_id,
			CASE WHEN x.kept THEN NULL ELSE u.payload END, CASE WHEN x.kept THEN 0 ELSE u.pushed_at END, u.consumer_version
		FROM u CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM messages m WHERE m.seq = u.seq) AS kept) x`
	fileLocked = `
		WHERE (SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock(?17)) l) = 1`
	fileTail = `
		ORDER BY u.n
		ON CONFLICT (seq, group_id) DO NOTHING
		RETURNING id, seq, group_id),
	f AS (SELECT dl.id, u.* FROM dl JOIN u ON u.seq = dl.seq AND u.group_id = dl.group_id),
	e AS (INSERT INTO dead_letter_errors (docid, dead_letter_errors) SELECT f.id, CAST(f.error_words AS tsvector) FROM f),
	p AS (INSERT INTO dead_letter_payloads (docid, dead_letter_payloads)
		SELECT DISTINCT ON (f.seq) f.seq, CAST(f.payload_words AS tsvector) FROM f WHERE f.payload_words IS NOT NULL ORDER BY f.seq, f.n
		ON CONFLICT (docid) DO NOTHING),
	g AS (INSERT INTO error_groups (queue_id, group_id, fingerprint, dead_letters, first_failed_at, last_failed_at, sample_error)
		SELECT f.queue_id, f.group_id, f.fingerprint, COUNT(*), MIN(f.failed_at), MAX(f.failed_at), (array_agg(f.error ORDER BY f.failed_at DESC, f.n DESC))[1]
		FROM f GROUP BY f.queue_id, f.group_id, f.fingerprint
		ON CONFLICT (queue_id, group_id, fingerprint) DO UPDATE SET
			dead_letters = error_groups.dead_letters + excluded.dead_letters,
			first_failed_at = LEAST(error_groups.first_failed_at, excluded.first_failed_at),
			sample_error = CASE WHEN excluded.last_failed_at >= error_groups.last_failed_at THEN excluded.sample_error ELSE error_groups.sample_error END,
			last_failed_at = GREATEST(error_groups.last_failed_at, excluded.last_failed_at)),
	h AS (INSERT INTO error_group_hours (queue_id, group_id, fingerprint, hour, filed)
		SELECT f.queue_id, f.group_id, f.fingerprint, f.failed_at / 3600000, COUNT(*) FROM f GROUP BY f.queue_id, f.group_id, f.fingerprint, f.failed_at / 3600000
		ON CONFLICT (queue_id, group_id, fingerprint, hour) DO UPDATE SET filed = error_group_hours.filed + excluded.filed),
	v AS (INSERT INTO error_group_versions (queue_id, group_id, fingerprint, version, filed, first_seen, last_seen)
		SELECT f.queue_id, f.group_id, f.fingerprint, f.consumer_version, COUNT(*), MIN(f.failed_at), MAX(f.failed_at)
		FROM f WHERE f.consumer_version <> '' GROUP BY f.queue_id, f.group_id, f.fingerprint, f.consumer_version
		ON CONFLICT (queue_id, group_id, fingerprint, version) DO UPDATE SET
			filed = error_group_versions.filed + excluded.filed,
			first_seen = LEAST(error_group_versions.first_seen, excluded.first_seen),
			last_seen = GREATEST(error_group_versions.last_seen, excluded.last_seen))
	SELECT id, seq, group_id FROM dl`
)

// fileSQL files the dead letters of a write that runs alone;
// fileLockedSQL of one beside others, the filing lock taken first.
const (
	fileSQL       = fileHead + fileTail
	fileLockedSQL = fileHead + fileLocked + fileTail
)

// FileDeadLetters is broker.Tx.FileDeadLetters on PostgreSQL: two
// statements, the payloads to index read (payloadsToIndex), then
// fileSQL (or fileLockedSQL beside other processes).
func (d dialect) FileDeadLetters(ctx context.Context, t *sqlcore.Tx, ds []*broker.DeadLetter) ([]bool, error) {
	n := len(ds)
	seqs, queues, parts, groups := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	errs, retries, failed, txids := make([]string, n), make([]int64, n), make([]int64, n), make([]string, n)
	errBytes, fingerprints, traces := make([]int64, n), make([]string, n), make([]string, n)
	payloads, pushed, versions := make([][]byte, n), make([]int64, n), make([]string, n)
	errWords, payloadWords := make([]string, n), make([]*string, n)
	index := make(map[[2]int64]int, n)
	toIndex, err := payloadsToIndex(ctx, t, ds)
	if err != nil {
		return nil, err
	}
	for i, dl := range ds {
		dl.Error, dl.Fingerprint, dl.ConsumerVersion = text(dl.Error), text(dl.Fingerprint), text(dl.ConsumerVersion)
		seqs[i], queues[i], parts[i], groups[i] = dl.Seq, dl.QueueID, dl.PartitionID, dl.GroupID
		errs[i], retries[i], failed[i], txids[i] = dl.Error, int64(dl.RetryCount), sqlcore.MS(dl.FailedAt), dl.TransactionID
		errBytes[i], fingerprints[i], traces[i] = int64(dl.ErrorBytes), dl.Fingerprint, dl.TraceID
		payloads[i], pushed[i], versions[i] = dl.Payload, sqlcore.MS(dl.CreatedAt), dl.ConsumerVersion
		errWords[i] = tsvector(dl.Error)
		if payload, ok := toIndex[dl.Seq]; ok {
			w := tsvector(payloadText(payload))
			payloadWords[i] = &w
			delete(toIndex, dl.Seq) // indexed once
		}
		index[[2]int64{dl.Seq, dl.GroupID}] = i
	}
	args := []any{seqs, queues, parts, groups, errs, retries, failed, txids, errBytes, fingerprints, traces, payloads, pushed, versions, errWords, payloadWords}
	query := fileSQL
	if d.locked {
		query, args = fileLockedSQL, append(args, int64(fileLock))
	}
	rows, err := t.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	filed := make([]bool, n)
	for rows.Next() {
		var id, seq, group int64
		if err := rows.Scan(&id, &seq, &group); err != nil {
			rows.Close()
			return nil, err
		}
		i, ok := index[[2]int64{seq, group}]
		if !ok {
			rows.Close()
			return nil, fmt.Errorf("file dead letters: a dead letter of message %d, group %d, not asked for", seq, group)
		}
		ds[i].ID, filed[i] = id, true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	return filed, nil
}

// payloadsSQL reads, of each message seq of an array, its payload
// (NULL once retention removed the message) and whether a dead letter
// of it is there already (its payload is indexed then).
const payloadsSQL = `SELECT s.seq, m.payload, EXISTS (SELECT 1 FROM dead_letters o WHERE o.seq = s.seq)
	FROM unnest(?1::bigint[]) AS s(seq) LEFT JOIN messages m ON m.seq = s.seq`

// payloadsToIndex returns the payloads of the messages of ds that no
// dead letter has indexed yet, by seq, in one query (payloadsSQL): the
// message's, or the dead letter's own once its message is gone (a
// restore's, as IndexDeadLetter reads it); none when it has neither.
func payloadsToIndex(ctx context.Context, t *sqlcore.Tx, ds []*broker.DeadLetter) (map[int64][]byte, error) {
	own := make(map[int64][]byte, len(ds))
	seqs := make([]int64, 0, len(ds))
	for _, d := range ds {
		if _, ok := own[d.Seq]; !ok {
			seqs = append(seqs, d.Seq)
		}
		if own[d.Seq] == nil {
			own[d.Seq] = d.Payload
		}
	}
	rows, err := t.Query(ctx, payloadsSQL, seqs)
	if err != nil {
		return nil, err
	}
	out := make(map[int64][]byte, len(seqs))
	for rows.Next() {
		var seq int64
		var payload []byte
		var indexed bool
		if err := rows.Scan(&seq, &payload, &indexed); err != nil {
			rows.Close()
			return nil, err
		}
		if payload == nil {
			payload = own[seq]
		}
		if !indexed && payload != nil {
			out[seq] = payload
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	return out, nil
}

// insertAuditsSQL inserts audit entries given as one array a column, in
// the arrays' order.
const insertAuditsSQL = `INSERT INTO audit (at, actor, action, queue, group_name, count, detail, job_id, broker)
	SELECT a.at, a.actor, a.action, a.queue, a.group_name, a.count, a.detail, a.job_id, a.broker
	FROM unnest(?1::bigint[], ?2::text[], ?3::text[], ?4::text[], ?5::text[], ?6::bigint[], ?7::text[], ?8::bigint[], ?9::bigint[])
		WITH ORDINALITY AS a(at, actor, action, queue, group_name, count, detail, job_id, broker, n)
	ORDER BY a.n`

// InsertAudits is broker.Tx.InsertAudits on PostgreSQL: one statement
// (insertAuditsSQL), kept for the next round trip (ExecLater): no id is
// read back.
func (dialect) InsertAudits(ctx context.Context, t *sqlcore.Tx, as []broker.AuditEntry) error {
	n := len(as)
	at, counts, jobs, brokers := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	actors, actions, queues, groups, details := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, a := range as {
		at[i], counts[i], jobs[i], brokers[i] = sqlcore.MS(a.At), int64(a.Count), a.JobID, sqlcore.B2I(a.Broker)
		actors[i], actions[i], queues[i], groups[i], details[i] = a.Actor, a.Action, a.Queue, a.Group, a.Detail
	}
	return t.ExecLater(ctx, insertAuditsSQL, at, actors, actions, queues, groups, counts, details, jobs, brokers)
}
