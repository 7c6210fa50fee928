package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Tx implements broker.Tx on one SQL transaction: the writer's, or
// a read transaction on a connection of the read pool (View).
type Tx struct {
	// ex runs the transaction's statements; d is its store's dialect.
	ex Executor
	d  Dialect
	// locks: a PostgreSQL write marked broker.UpdateOptions.Concurrent,
	// beside others, has Consumer, ConsumerByLease, ReadyConsumers and
	// InsertMessages take row locks (broker.Tx: Locks); every other
	// write takes none.
	locks Locks
	// pushedTo are the partitions this transaction has added messages to
	// (see markReady and foldCounts), saved the consumers it has written
	// (foldCounts): [partition, group].
	pushedTo map[int64]struct{}
	saved    map[[2]int64]struct{}
	// scope is the write transaction's memory (nil in a View), ended by
	// the writer's commit.
	scope *broker.TxScope
	// memo serves Consumer and MessageRange from what the writer's last
	// transactions saved and read (nil: every read goes to the database;
	// see Memo).
	memo *Memo
	// settled: the full-text indexes hold every addition this read
	// needs, which an earlier read waited for (ExportCursor.Settled);
	// awaited: a wait for them has returned in this transaction.
	settled, awaited bool
}

// newTx is a transaction that runs its statements on ex, in dialect d,
// taking locks lk, with scope as its memory (nil in a View).
func NewTx(ex Executor, d Dialect, lk Locks, scope *broker.TxScope) *Tx {
	return &Tx{ex: ex, d: d, locks: lk, scope: scope}
}

// WithMemo has t serve reads from m, and keep m up to date with what
// it saves and reads (a write transaction of the SQLite store's writer,
// which empties m whenever something else may have changed it).
func (t *Tx) WithMemo(m *Memo) *Tx {
	t.memo = m
	return t
}

// Scope returns the transaction's broker.TxScope: the writer's commit
// makes one a transaction and ends it once the transaction has ended
// (nil in a View). It touches no table.
func (t *Tx) Scope() *broker.TxScope { return t.scope }

// Pushed notes that the transaction added messages to a partition.
func (t *Tx) Pushed(partitionID int64) {
	if t.pushedTo == nil {
		t.pushedTo = map[int64]struct{}{}
	}
	t.pushedTo[partitionID] = struct{}{}
}

// MarkReady marks ready the consumers of the partitions the transaction
// pushed to (migration 0009), with one statement, just before it
// commits: for every write of a group, those rolled back to their
// savepoint included. A consumer marked ready with nothing past its
// cursor costs a pop one look (and is cleared then); one left unready
// with messages waiting would never be served. A pop later in the same
// group commit as a push does not see the push's messages in partitions
// that were unready (it does in the others); nothing is lost, they are
// marked before the commit, and a pop that waits is woken by the push.
func (t *Tx) MarkReady(ctx context.Context) error {
	q, args := t.MarkReadyStatement()
	if q == "" {
		return nil
	}
	_, err := t.Exec(ctx, q, args...)
	return err
}

// MarkReadyStatement is markReady's statement and its arguments ("":
// none to run), for a store that sends it with others (the PostgreSQL
// store's commit).
func (t *Tx) MarkReadyStatement() (string, []any) {
	switch len(t.pushedTo) {
	case 0:
		return "", nil
	case 1:
		for id := range t.pushedTo {
			return MarkReadySQL, []any{id}
		}
	}
	ids := make([]int64, 0, len(t.pushedTo))
	for id := range t.pushedTo {
		ids = append(ids, id)
	}
	return MarkReadyManySQL, []any{IntsJSON(ids)}
}

// MarkReadySQL and MarkReadyManySQL are markReady's statements, for one
// partition and for several.
const (
	MarkReadySQL     = `UPDATE consumers SET ready = 1 WHERE partition_id = ? AND ready = 0`
	MarkReadyManySQL = `UPDATE consumers SET ready = 1 WHERE partition_id IN (SELECT value FROM json_each(?)) AND ready = 0`
)

// PGInsert is PGQuery for an INSERT run by Tx.Insert, which on
// PostgreSQL adds RETURNING col to the text: both texts, with and
// without it, are given their PostgreSQL statement.
func PGInsert(col, sqlite, pg string) string {
	PGQuery(sqlite+" RETURNING "+col, pg+" RETURNING "+col)
	return PGQuery(sqlite, pg)
}

var _ broker.Tx = (*Tx)(nil)

var errNoRows = sql.ErrNoRows

func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, broker.ErrNotFound)
	}
	return err
}

func B2I(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

const queueCols = `id, name, lease_time, retry_limit, retry_delay, dead_letter_queue, dlq_after_max_retries, created_at,
	COALESCE(namespace, ''), COALESCE(task, ''), delayed_processing, kept_options, replay_pause_percent, replay_pause_window,
	completed_retention, retention, dead_letter_retention, retry_backoff, retry_delay_max, max_replays, dead_letter_archive,
	hold_after_failures, hold_probe_seconds, mask_paths, mask_reveal_role`

func scanQueue(s interface{ Scan(...any) error }) (broker.Queue, error) {
	var q broker.Queue
	var dlq, after, created, archive int64
	var kept, maskPaths, revealRole string
	err := s.Scan(&q.ID, &q.Name, &q.Options.LeaseTime, &q.Options.RetryLimit, &q.Options.RetryDelay, &dlq, &after, &created,
		&q.Namespace, &q.Task, &q.Options.DelayedProcessing, &kept, &q.Options.ReplayPausePercent, &q.Options.ReplayPauseWindow,
		&q.Options.CompletedRetentionSeconds, &q.Options.RetentionSeconds, &q.Options.DeadLetterRetentionSeconds,
		&q.Options.RetryBackoff, &q.Options.RetryDelayMax, &q.Options.MaxReplays, &archive,
		&q.Options.HoldAfterFailures, &q.Options.HoldProbeSeconds, &maskPaths, &revealRole)
	q.Options.MaskPaths, q.Options.MaskRevealRole = broker.MaskPaths(maskPaths), broker.Role(revealRole)
	q.Options.DeadLetterQueue, q.Options.DLQAfterMaxRetries, q.CreatedAt = dlq != 0, after != 0, FromMS(created)
	q.Options.DeadLetterArchive = archive != 0
	if err == nil {
		q.Options.Kept, err = keptOptions(kept)
	}
	return q, err
}

// keptOptions reads the kept_options column (migration 0011): "" when
// the queue keeps none.
func keptOptions(s string) (broker.KeptOptions, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return "", fmt.Errorf("queue kept options: %w", err)
	}
	if len(m) == 0 {
		return "", nil
	}
	return broker.KeptOptions(s), nil
}

// keptJSON writes the kept_options column.
func keptJSON(k broker.KeptOptions) (string, error) {
	if k == "" {
		return "{}", nil
	}
	if !json.Valid([]byte(k)) {
		return "", fmt.Errorf("queue kept options are not JSON")
	}
	return string(k), nil
}

// orNull is s, or NULL when empty.
func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// QueueByName reads queues by UNIQUE(name).
func (t *Tx) QueueByName(ctx context.Context, name string) (broker.Queue, error) {
	q, err := scanQueue(t.QueryRow(ctx, `SELECT `+queueCols+` FROM queues WHERE name = ?`, name))
	return q, notFound(err, "queue")
}

// QueueByID reads queues by the primary key.
func (t *Tx) QueueByID(ctx context.Context, id int64) (broker.Queue, error) {
	q, err := scanQueue(t.QueryRow(ctx, `SELECT `+queueCols+` FROM queues WHERE id = ?`, id))
	return q, notFound(err, "queue")
}

// Queues reads queues whole, by name.
func (t *Tx) Queues(ctx context.Context) ([]broker.Queue, error) {
	rows, err := t.Query(ctx, `SELECT `+queueCols+` FROM queues ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.Queue
	for rows.Next() {
		q, err := scanQueue(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

// CreateQueue inserts a row of queues (kept options as JSON, an empty
// namespace or task as NULL) and takes its rowid as q.ID, ON CONFLICT
// (name) DO NOTHING: when the name is taken, the queue that has it is
// read into q instead (a get-or-create that cannot race).
func (t *Tx) CreateQueue(ctx context.Context, q *broker.Queue) error {
	o := q.Options
	kept, err := keptJSON(o.Kept)
	if err != nil {
		return err
	}
	n, id, err := t.Insert(ctx, "id", `INSERT INTO queues (name, lease_time, retry_limit, retry_delay, dead_letter_queue, dlq_after_max_retries, created_at,
		namespace, task, delayed_processing, kept_options, replay_pause_percent, replay_pause_window,
		completed_retention, retention, dead_letter_retention, retry_backoff, retry_delay_max, max_replays, dead_letter_archive,
		hold_after_failures, hold_probe_seconds, mask_paths, mask_reveal_role)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO NOTHING`, q.Name, o.LeaseTime, o.RetryLimit, o.RetryDelay, B2I(o.DeadLetterQueue), B2I(o.DLQAfterMaxRetries), MS(q.CreatedAt),
		orNull(q.Namespace), orNull(q.Task), o.DelayedProcessing, kept, o.ReplayPausePercent, o.ReplayPauseWindow,
		o.CompletedRetentionSeconds, o.RetentionSeconds, o.DeadLetterRetentionSeconds,
		o.RetryBackoff, o.RetryDelayMax, o.MaxReplays, B2I(o.DeadLetterArchive), o.HoldAfterFailures, o.HoldProbeSeconds,
		string(o.MaskPaths), string(o.RevealRole()))
	switch {
	case err != nil:
		return err
	case n == 0:
		*q, err = t.QueueByName(ctx, q.Name)
		return err
	}
	q.ID = id
	return nil
}

// UpdateQueue writes the queues row of q.ID: options, kept options,
// namespace and task (NULL when empty). A queue that is not there is not
// an error: nothing is written.
func (t *Tx) UpdateQueue(ctx context.Context, q broker.Queue) error {
	o := q.Options
	kept, err := keptJSON(o.Kept)
	if err != nil {
		return err
	}
	_, err = t.Exec(ctx, `UPDATE queues SET lease_time = ?, retry_limit = ?, retry_delay = ?, dead_letter_queue = ?, dlq_after_max_retries = ?,
		namespace = ?, task = ?, delayed_processing = ?, kept_options = ?, replay_pause_percent = ?, replay_pause_window = ?,
		completed_retention = ?, retention = ?, dead_letter_retention = ?,
		retry_backoff = ?, retry_delay_max = ?, max_replays = ?, dead_letter_archive = ?,
		hold_after_failures = ?, hold_probe_seconds = ?, mask_paths = ?, mask_reveal_role = ? WHERE id = ?`,
		o.LeaseTime, o.RetryLimit, o.RetryDelay, B2I(o.DeadLetterQueue), B2I(o.DLQAfterMaxRetries),
		orNull(q.Namespace), orNull(q.Task), o.DelayedProcessing, kept, o.ReplayPausePercent, o.ReplayPauseWindow,
		o.CompletedRetentionSeconds, o.RetentionSeconds, o.DeadLetterRetentionSeconds,
		o.RetryBackoff, o.RetryDelayMax, o.MaxReplays, B2I(o.DeadLetterArchive), o.HoldAfterFailures, o.HoldProbeSeconds,
		string(o.MaskPaths), string(o.RevealRole()), q.ID)
	return err
}

// DeleteQueue deletes the queue id and every row of it, each table by
// its queue_id (or by its queue's messages): its full-text index rows,
// its copies' replay outcomes (leaving their jobs' counts to settle),
// edits and replays, attempts, deleted dead letters' records, settle
// marks, traces, messages, consumers, dead letters, error groups and their
// hours, group stats, subscriptions, holds and the circuit breaker's
// streaks, partitions and the queues row. It
// reads the highest message first: when the queue held it, the
// placeholder row of keepSeqFloor (partition 0) is written or moved to
// one above it, so that seqs keep growing. A queue that is not there
// deletes nothing (no error).
func (t *Tx) DeleteQueue(ctx context.Context, id int64) error {
	if err := t.unindexQueue(ctx, id); err != nil {
		return err
	}
	// Seqs keep growing when the queue had the newest messages
	// (keepSeqFloor): a partition whose own newest were swept by
	// retention has cursors past seqs a push would else get again.
	var top, topAt int64
	if err := t.QueryRow(ctx, `SELECT seq, created_at FROM messages ORDER BY seq DESC LIMIT 1`).Scan(&top, &topAt); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	stmts := []string{
		// A job's copies in the queue that were still pending will never
		// settle: they leave its count of copies to settle.
		`UPDATE job_outcomes SET replayed = replayed - x.n
			FROM (SELECT o.job_id, o.group_id, COUNT(*) AS n FROM replay_outcomes o
				WHERE o.job_id > 0 AND o.outcome = 0 AND o.copy_seq IN (SELECT m.seq FROM messages m JOIN partitions p ON p.id = m.partition_id WHERE p.queue_id = ?1)
				GROUP BY o.job_id, o.group_id) x
			WHERE job_outcomes.job_id = x.job_id AND job_outcomes.group_id = x.group_id`,
		// So are they in the error groups' lost (copies replayed here
		// from another queue).
		`UPDATE error_group_states SET lost = lost + x.n
			FROM (SELECT o.error_group, COUNT(*) AS n FROM replay_outcomes o
				WHERE o.error_group > 0 AND o.outcome = 0 AND o.copy_seq IN (SELECT m.seq FROM messages m JOIN partitions p ON p.id = m.partition_id WHERE p.queue_id = ?1)
				GROUP BY o.error_group) x
			WHERE error_group_states.id = x.error_group`,
		`DELETE FROM replay_outcomes WHERE copy_seq IN (SELECT m.seq FROM messages m JOIN partitions p ON p.id = m.partition_id WHERE p.queue_id = ?1)`,
		`DELETE FROM replay_edits WHERE copy_seq IN (SELECT m.seq FROM messages m JOIN partitions p ON p.id = m.partition_id WHERE p.queue_id = ?1)`,
		`DELETE FROM replays WHERE copy_seq IN (SELECT m.seq FROM messages m JOIN partitions p ON p.id = m.partition_id WHERE p.queue_id = ?1)`,
		`DELETE FROM attempts WHERE seq IN (SELECT m.seq FROM messages m JOIN partitions p ON p.id = m.partition_id WHERE p.queue_id = ?1)`,
		`DELETE FROM removed_dead_letters WHERE queue_id = ?1`,
		`DELETE FROM settle_marks WHERE queue_id = ?1`,
		`DELETE FROM message_traces WHERE queue_id = ?1`,
		`DELETE FROM messages WHERE partition_id IN (SELECT id FROM partitions WHERE queue_id = ?1)`,
		`DELETE FROM consumers WHERE queue_id = ?1`,
		`DELETE FROM dead_letters WHERE queue_id = ?1`,
		`DELETE FROM error_groups WHERE queue_id = ?1`,
		`DELETE FROM error_group_hours WHERE queue_id = ?1`,
		`DELETE FROM error_group_history WHERE state_id IN (SELECT id FROM error_group_states WHERE queue_id = ?1)`,
		`DELETE FROM error_group_states WHERE queue_id = ?1`,
		`DELETE FROM error_group_versions WHERE queue_id = ?1`,
		`DELETE FROM group_stats WHERE queue_id = ?1`,
		`DELETE FROM subscriptions WHERE queue_id = ?1`,
		`DELETE FROM holds WHERE queue_id = ?1`,
		`DELETE FROM group_breakers WHERE queue_id = ?1`,
		`DELETE FROM partitions WHERE queue_id = ?1`,
		`DELETE FROM queues WHERE id = ?1`,
	}
	for _, s := range stmts {
		if _, err := t.Exec(ctx, s, id); err != nil {
			return err
		}
	}
	var left int64
	if err := t.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM messages`).Scan(&left); err != nil {
		return err
	}
	if top > 0 && left < top {
		return t.KeepSeqFloor(ctx, top+1, topAt)
	}
	return nil
}

const partitionCols = `id, uuid, queue_id, name, created_at`

func scanPartition(s interface{ Scan(...any) error }) (broker.Partition, error) {
	var p broker.Partition
	var created int64
	err := s.Scan(&p.ID, &p.UUID, &p.QueueID, &p.Name, &created)
	p.CreatedAt = FromMS(created)
	return p, err
}

// PartitionByName reads partitions by UNIQUE(queue_id, name).
func (t *Tx) PartitionByName(ctx context.Context, queueID int64, name string) (broker.Partition, error) {
	p, err := scanPartition(t.QueryRow(ctx, `SELECT `+partitionCols+` FROM partitions WHERE queue_id = ? AND name = ?`, queueID, name))
	return p, notFound(err, "partition")
}

// PartitionByID reads partitions by the primary key.
func (t *Tx) PartitionByID(ctx context.Context, id int64) (broker.Partition, error) {
	p, err := scanPartition(t.QueryRow(ctx, `SELECT `+partitionCols+` FROM partitions WHERE id = ?`, id))
	return p, notFound(err, "partition")
}

// PartitionByUUID reads partitions by UNIQUE(uuid).
func (t *Tx) PartitionByUUID(ctx context.Context, uuid string) (broker.Partition, error) {
	p, err := scanPartition(t.QueryRow(ctx, `SELECT `+partitionCols+` FROM partitions WHERE uuid = ?`, uuid))
	return p, notFound(err, "partition")
}

// messagesOf is the SQL for the messages of the partition row named p
// (migration 0010): its count kept up to counted_seq, and those pushed
// since, at most about a second's worth.
func messagesOf(p string) string {
	return p + `.messages + (SELECT COUNT(*) FROM messages m WHERE m.partition_id = ` + p + `.id AND m.seq > ` + p + `.counted_seq)`
}

// Partitions reads the queue's partitions by UNIQUE(queue_id, name), each
// with its kept count and a count of its messages past counted_seq
// (messagesOf, by messages_partition_seq).
func (t *Tx) Partitions(ctx context.Context, queueID int64) ([]broker.PartitionInfo, error) {
	rows, err := t.Query(ctx, `SELECT p.id, p.uuid, p.queue_id, p.name, p.created_at, `+messagesOf("p")+`
		FROM partitions p WHERE p.queue_id = ? ORDER BY p.name`, queueID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.PartitionInfo
	for rows.Next() {
		var pi broker.PartitionInfo
		var created int64
		if err := rows.Scan(&pi.ID, &pi.UUID, &pi.QueueID, &pi.Name, &created, &pi.Messages); err != nil {
			return nil, err
		}
		pi.CreatedAt = FromMS(created)
		out = append(out, pi)
	}
	return out, rows.Err()
}

// CreatePartition inserts the partitions row ON CONFLICT (queue_id,
// name) DO NOTHING, then a consumers row for each subscription of its
// queue (the columns' defaults: cursor 0, ready 1, kept count 0); when
// the name is taken, the partition that has it is read into p instead
// (a get-or-create that cannot race). A UUID taken fails on its UNIQUE
// constraint.
func (t *Tx) CreatePartition(ctx context.Context, p *broker.Partition) error {
	n, id, err := t.Insert(ctx, "id", `INSERT INTO partitions (queue_id, name, uuid, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (queue_id, name) DO NOTHING`, p.QueueID, p.Name, p.UUID, MS(p.CreatedAt))
	switch {
	case err != nil:
		return err
	case n == 0:
		*p, err = t.PartitionByName(ctx, p.QueueID, p.Name)
		return err
	}
	p.ID = id
	// Groups already reading the queue read the new partition from its start.
	_, err = t.Exec(ctx, `INSERT INTO consumers (partition_id, group_id, queue_id)
		SELECT ?, group_id, queue_id FROM subscriptions WHERE queue_id = ?`, p.ID, p.QueueID)
	return err
}

// GroupName reads groups by the primary key.
func (t *Tx) GroupName(ctx context.Context, id int64) (string, error) {
	var name string
	err := t.QueryRow(ctx, `SELECT name FROM groups WHERE id = ?`, id).Scan(&name)
	return name, notFound(err, "consumer group")
}

// GroupID reads groups by UNIQUE(name) and, when there is none and
// create is set, inserts one ON CONFLICT (name) DO NOTHING, reading the
// one made meanwhile by another writer (a get-or-create that cannot
// race).
func (t *Tx) GroupID(ctx context.Context, name string, create bool) (int64, error) {
	var id int64
	err := t.QueryRow(ctx, `SELECT id FROM groups WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) && create {
		n, id, err := t.Insert(ctx, "id", `INSERT INTO groups (name) VALUES (?) ON CONFLICT (name) DO NOTHING`, name)
		if err != nil || n > 0 {
			return id, err
		}
		err = t.QueryRow(ctx, `SELECT id FROM groups WHERE name = ?`, name).Scan(&id)
		return id, notFound(err, "group")
	}
	return id, notFound(err, "group")
}

// Subscribed probes subscriptions' primary key.
func (t *Tx) Subscribed(ctx context.Context, queueID, groupID int64) (bool, error) {
	var one int
	err := t.QueryRow(ctx, `SELECT 1 FROM subscriptions WHERE queue_id = ? AND group_id = ?`, queueID, groupID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Subscribe inserts the subscriptions row, then, in one INSERT ... SELECT
// over the queue's partitions, a consumer each with its cursor, ready
// mark and kept count. A subscription that exists fails on the primary
// key.
func (t *Tx) Subscribe(ctx context.Context, queueID, groupID int64, start broker.Start, now time.Time) error {
	// reads_back (migration 0023): whether its cursors may start behind
	// messages already pushed (completed retention's settle marks);
	// starts_at (migration 0031): where it starts, 0 the beginning.
	startsAt := MS(start.From)
	if start.Now {
		startsAt = MS(now)
	}
	if _, err := t.Exec(ctx, `INSERT INTO subscriptions (queue_id, group_id, subscribed_at, reads_back, starts_at) VALUES (?, ?, ?, ?, ?)`,
		queueID, groupID, MS(now), B2I(!start.Now), startsAt); err != nil {
		return err
	}
	return t.insertConsumers(ctx, queueID, groupID, 0, start, false)
}

// insertConsumers makes the group's consumers of the queue's partitions
// (of partitionID alone when not 0; with missing, of those where the
// group has none) at start: a cursor, a ready mark and a kept count each.
// One that exists fails on the primary key.
func (t *Tx) insertConsumers(ctx context.Context, queueID, groupID, partitionID int64, start broker.Start, missing bool) error {
	// The cursor is the last message the group is taken to have read. ?1 is
	// the start time, ?2 the group, ?3 the queue, ?4 the partition.
	cursor := `0`
	switch {
	case start.Now:
		cursor = `COALESCE((SELECT MAX(m.seq) FROM messages m WHERE m.partition_id = p.id), 0)`
	case !start.From.IsZero():
		cursor = `COALESCE((SELECT MAX(m.seq) FROM messages m WHERE m.partition_id = p.id AND m.created_at < ?1), 0)`
	}
	// The messages up to the cursor (migration 0010): none from the
	// beginning, all of them from now (the partition's count), and from a
	// time those before it, counted as the cursor was found.
	passed := `0`
	switch {
	case start.Now:
		passed = messagesOf("c")
	case !start.From.IsZero():
		passed = `(SELECT COUNT(*) FROM messages m WHERE m.partition_id = c.id AND m.seq <= c.cursor)`
	}
	onePartition, args := ``, []any{MS(start.From), groupID, queueID}
	if partitionID != 0 {
		onePartition, args = ` AND p.id = ?4`, append(args, partitionID)
	}
	if missing {
		onePartition += ` AND NOT EXISTS (SELECT 1 FROM consumers x WHERE x.partition_id = p.id AND x.group_id = ?2)`
	}
	// Ready when anything is past the cursor (migration 0009).
	_, err := t.Exec(ctx, `INSERT INTO consumers (partition_id, group_id, queue_id, cursor, ready, passed, passed_seq)
		SELECT c.id, ?2, c.queue_id, c.cursor, CASE WHEN (SELECT m.seq FROM messages m WHERE m.partition_id = c.id AND m.seq > c.cursor LIMIT 1) IS NOT NULL THEN 1 ELSE 0 END,
			`+passed+`, c.cursor
		FROM (SELECT p.id, p.queue_id, p.messages, p.counted_seq, `+cursor+` AS cursor FROM partitions p WHERE p.queue_id = ?3`+onePartition+`) c`, args...)
	return err
}

// Groups reads the queue's subscriptions with their groups' names, by
// name, and for each the lag and the live leases over the queue's
// partitions and the group's consumers.
func (t *Tx) Groups(ctx context.Context, queueID int64, now time.Time) ([]broker.GroupInfo, error) {
	// Lag: each partition's messages less those up to the group's cursor,
	// both from the counts kept (migration 0010) and what lies past them.
	// The queue's partitions lead (CROSS JOIN), and the consumers follow by
	// their key: no index leads consumers with the queue and group.
	rows, err := t.Query(ctx, `SELECT g.id, g.name, s.subscribed_at,
		(SELECT COALESCE(SUM(`+messagesOf("p")+`
			- c.passed - (SELECT COUNT(*) FROM messages m WHERE m.partition_id = c.partition_id AND m.seq > c.passed_seq AND m.seq <= c.cursor)), 0)
			FROM partitions p CROSS JOIN consumers c ON c.partition_id = p.id AND c.group_id = s.group_id
			WHERE p.queue_id = s.queue_id),
		(SELECT COUNT(*) FROM partitions p CROSS JOIN consumers c ON c.partition_id = p.id AND c.group_id = s.group_id
			WHERE p.queue_id = s.queue_id AND c.lease_id IS NOT NULL AND c.lease_until > ?)
		FROM subscriptions s JOIN groups g ON g.id = s.group_id WHERE s.queue_id = ? ORDER BY g.name`, MS(now), queueID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.GroupInfo
	for rows.Next() {
		var g broker.GroupInfo
		var at int64
		if err := rows.Scan(&g.ID, &g.Name, &at, &g.Lag, &g.Leased); err != nil {
			return nil, err
		}
		g.SubscribedAt = FromMS(at)
		out = append(out, g)
	}
	return out, rows.Err()
}

// InsertMessage inserts a row of messages ON CONFLICT (partition_id,
// transaction_id) DO NOTHING. Its seq is the rowid SQLite picks, one
// above the highest (the placeholder of keepSeqFloor keeps that above
// every seq given). A duplicate is read back by that index; a message
// inserted notes its partition for markReady and foldCounts.
func (t *Tx) InsertMessage(ctx context.Context, m *broker.Message) (bool, error) {
	// Its partition's seqs commit in order (broker.Tx.InsertMessage).
	if err := t.locks.LockPartition(ctx, t, m.PartitionID); err != nil {
		return false, err
	}
	n, seq, err := t.Insert(ctx, "seq", InsertMessageSQL, m.PartitionID, m.TransactionID, []byte(m.Payload), m.TraceID, MS(m.CreatedAt))
	if err != nil {
		return false, err
	}
	if n == 0 {
		// Nothing pushed: the existing message was marked when it was.
		existing, err := t.MessageByTransaction(ctx, m.PartitionID, m.TransactionID)
		if err != nil {
			return false, err
		}
		*m = existing
		return false, nil
	}
	m.Seq = seq
	t.Pushed(m.PartitionID)
	return true, nil
}

// InsertMessageSQL is InsertMessage's statement.
const InsertMessageSQL = `INSERT INTO messages (partition_id, transaction_id, payload, trace_id, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (partition_id, transaction_id) DO NOTHING`

// InsertMessages inserts ms in their order as InsertMessage does each.
// On SQLite it calls InsertMessage for each message: a statement costs no
// round trip there, and the push's statement stays the one measured. On
// PostgreSQL, where every statement is a round trip, it is one statement
// for all of them and one more to read back the duplicates, when there
// are some (pgInsertMessages).
func (t *Tx) InsertMessages(ctx context.Context, ms []*broker.Message) ([]bool, error) {
	return t.d.InsertMessages(ctx, t, ms)
}

// LateInserter is a Dialect whose InsertMessagesLate differs from
// InsertMessages (PostgreSQL's, which keeps the insert for the COMMIT's
// round trip).
type LateInserter interface {
	InsertMessagesLate(ctx context.Context, t *Tx, ms []*broker.Message, inserted []bool) error
}

// InsertMessagesLate is broker.Tx's: the dialect's (LateInserter), or
// InsertMessages at once.
func (t *Tx) InsertMessagesLate(ctx context.Context, ms []*broker.Message, inserted []bool) error {
	if len(inserted) != len(ms) {
		return fmt.Errorf("insert messages: %d answers for %d messages", len(inserted), len(ms))
	}
	if li, ok := t.d.(LateInserter); ok {
		if err := ctx.Err(); err != nil {
			return err
		}
		return li.InsertMessagesLate(ctx, t, ms, inserted)
	}
	out, err := t.InsertMessages(ctx, ms)
	copy(inserted, out)
	return err
}

// Executor is the transaction's executor, for a store's dialect that
// reaches its own (postgres.writer).
func (t *Tx) Executor() Executor { return t.ex }

// InsertEach is InsertMessages as InsertMessage one after the other.
func (t *Tx) InsertEach(ctx context.Context, ms []*broker.Message) ([]bool, error) {
	out := make([]bool, len(ms))
	for i, m := range ms {
		inserted, err := t.InsertMessage(ctx, m)
		if err != nil {
			return nil, err
		}
		out[i] = inserted
	}
	return out, nil
}

const MessageCols = `seq, partition_id, transaction_id, payload, trace_id, created_at`

func ScanMessage(s interface{ Scan(...any) error }) (broker.Message, error) {
	var m broker.Message
	var created int64
	err := s.Scan(&m.Seq, &m.PartitionID, &m.TransactionID, &m.Payload, &m.TraceID, &created)
	m.CreatedAt = FromMS(created)
	return m, err
}

// MessageBySeq reads messages by the primary key, payload included. The
// placeholder row of keepSeqFloor is a row too: its seq reads as a
// message of partition 0 with no transactionId.
func (t *Tx) MessageBySeq(ctx context.Context, seq int64) (broker.Message, error) {
	m, err := ScanMessage(t.QueryRow(ctx, `SELECT `+MessageCols+` FROM messages WHERE seq = ?`, seq))
	return m, notFound(err, "message")
}

// MessageByTransaction reads messages by UNIQUE(partition_id,
// transaction_id), payload included.
func (t *Tx) MessageByTransaction(ctx context.Context, partitionID int64, txid string) (broker.Message, error) {
	m, err := ScanMessage(t.QueryRow(ctx, `SELECT `+MessageCols+` FROM messages WHERE partition_id = ? AND transaction_id = ?`, partitionID, txid))
	return m, notFound(err, "message")
}

// MessageSeq reads the seq from UNIQUE(partition_id, transaction_id)
// alone: the index holds the rowid.
func (t *Tx) MessageSeq(ctx context.Context, partitionID int64, txid string) (int64, error) {
	var seq int64
	err := t.QueryRow(ctx, `SELECT seq FROM messages WHERE partition_id = ? AND transaction_id = ?`, partitionID, txid).Scan(&seq)
	return seq, notFound(err, "message")
}

// MessageRange walks messages_partition_seq over (after, last] and reads
// each row without returning its payload (the columns after it still
// walk a large payload's overflow pages).
func (t *Tx) MessageRange(ctx context.Context, partitionID, after, last int64) ([]broker.Message, error) {
	if ms, ok := t.memo.messageRange(partitionID, after, last); ok {
		return ms, nil
	}
	rows, err := t.Query(ctx, `SELECT seq, transaction_id, trace_id, created_at FROM messages WHERE partition_id = ? AND seq > ? AND seq <= ? ORDER BY seq`, partitionID, after, last)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.Message
	for rows.Next() {
		m := broker.Message{PartitionID: partitionID}
		var created int64
		if err := rows.Scan(&m.Seq, &m.TransactionID, &m.TraceID, &created); err != nil {
			return nil, err
		}
		m.CreatedAt = FromMS(created)
		out = append(out, m)
	}
	return out, rows.Err()
}

// MessagesAfter walks messages_partition_seq from after on, payloads
// included, up to limit rows.
func (t *Tx) MessagesAfter(ctx context.Context, partitionID, after int64, limit int) ([]broker.Message, error) {
	rows, err := t.Query(ctx, `SELECT `+MessageCols+` FROM messages WHERE partition_id = ? AND seq > ? ORDER BY seq LIMIT ?`, partitionID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.Message
	for rows.Next() {
		m, err := ScanMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	t.memo.read(partitionID, after, out)
	return out, nil
}

const ConsumerCols = `partition_id, group_id, queue_id, cursor, COALESCE(lease_id, ''), lease_until, lease_last, leased_at, retry_seq, retries, available_at, COALESCE(acks, ''), COALESCE(void_lease_id, ''), void_last`

func scanConsumer(s interface{ Scan(...any) error }) (broker.Consumer, error) {
	var c broker.Consumer
	var until, leasedAt, avail int64
	var acks string
	err := s.Scan(&c.PartitionID, &c.GroupID, &c.QueueID, &c.Cursor, &c.LeaseID, &until, &c.LeaseLast, &leasedAt, &c.RetrySeq, &c.Retries, &avail, &acks, &c.VoidLeaseID, &c.VoidLast)
	if err != nil {
		return c, err
	}
	c.LeaseUntil, c.LeasedAt, c.AvailableAt = FromMS(until), FromMS(leasedAt), FromMS(avail)
	if acks != "" {
		if err := json.Unmarshal([]byte(acks), &c.Acks); err != nil {
			return c, fmt.Errorf("consumer acks: %w", err)
		}
	}
	return c, nil
}

// Consumer reads consumers by the primary key (partition_id, group_id),
// in a shared write under the row's lock.
func (t *Tx) Consumer(ctx context.Context, partitionID, groupID int64) (broker.Consumer, error) {
	if c, ok := t.memo.consumer(partitionID, groupID); ok {
		return c, nil
	}
	c, err := scanConsumer(t.QueryRow(ctx, consumerSQL+t.locks.ForUpdate(), partitionID, groupID))
	return c, notFound(err, "consumer")
}

const consumerSQL = `SELECT ` + ConsumerCols + ` FROM consumers WHERE partition_id = ? AND group_id = ?`

// ConsumerByLease reads the consumer holding leaseID (its lease_id, not
// its void lease) by the primary key the id names (broker.NewLeaseID), or
// for a lease id made before migration 0027 by the index kept for those.
// Not found: no consumer holds that lease.
func (t *Tx) ConsumerByLease(ctx context.Context, leaseID string) (broker.Consumer, error) {
	var row Row
	if p, g, ok := broker.LeaseConsumer(leaseID); ok {
		if c, ok := t.memo.consumer(p, g); ok && leaseID != "" {
			if c.LeaseID != leaseID {
				return broker.Consumer{}, notFound(errNoRows, "lease")
			}
			return c, nil
		}
		row = t.QueryRow(ctx, consumerByLeaseSQL+t.locks.ForUpdate(), p, g, leaseID)
	} else {
		row = t.QueryRow(ctx, ConsumerByLeaseV7SQL+t.locks.ForUpdate(), leaseID)
	}
	c, err := scanConsumer(row)
	return c, notFound(err, "lease")
}

// consumerByLeaseSQL finds a lease by the consumer its id names.
const consumerByLeaseSQL = `SELECT ` + ConsumerCols + ` FROM consumers WHERE partition_id = ? AND group_id = ? AND lease_id = ?`

// ConsumerByLeaseV7SQL finds a lease made before migration 0027 by the
// partial index consumers_lease_v7 (its WHERE repeated, so that SQLite
// uses it).
const ConsumerByLeaseV7SQL = `SELECT ` + ConsumerCols + ` FROM consumers WHERE lease_id = ? AND lease_id IS NOT NULL AND substr(lease_id, 15, 1) <> '8'`

// ConsumersBySharedLease reads the consumers holding a shared lease id
// (broker.NewSharedLeaseID), in partition order, by the index of those
// (migration 0030): the id names the group, not the partitions.
func (t *Tx) ConsumersBySharedLease(ctx context.Context, leaseID string) ([]broker.Consumer, error) {
	return ScanConsumers(t.Query(ctx, ConsumersBySharedLeaseSQL+t.locks.ForUpdate(), leaseID))
}

// ScanConsumers reads every consumer of a query's rows (consumerCols).
func ScanConsumers(rows Rows, err error) ([]broker.Consumer, error) {
	if err != nil {
		return nil, err
	}
	var out []broker.Consumer
	for rows.Next() {
		c, err := scanConsumer(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, c)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// ConsumersBySharedLeaseSQL finds the consumers of a shared lease by the
// partial index consumers_lease_shared (its WHERE repeated, so that
// SQLite uses it): version 8, and the partition's 38 bits zero (the 27th
// character's low two bits and the nine after it).
const ConsumersBySharedLeaseSQL = `SELECT ` + ConsumerCols + ` FROM consumers WHERE lease_id = ?
	AND substr(lease_id, 15, 1) = '8' AND substr(lease_id, 27, 1) IN ('0', '4', '8', 'c') AND substr(lease_id, 28, 9) = '000000000'
	ORDER BY partition_id`

// SaveConsumer updates the consumers row by the primary key, all but
// ready, passed and passed_seq (markReady's and foldCounts'), and notes
// it for foldCounts. On PostgreSQL the update goes with the next round
// trip (execLater): a pop's or an ack's with its COMMIT. The rows affected are not checked: a consumer that
// is not there is no error.
func (t *Tx) SaveConsumer(ctx context.Context, c *broker.Consumer) error {
	var leaseID, voidID, acks any
	if c.LeaseID != "" {
		leaseID = c.LeaseID
	}
	if c.VoidLeaseID != "" {
		voidID = c.VoidLeaseID
	}
	if len(c.Acks) > 0 {
		b, err := json.Marshal(c.Acks)
		if err != nil {
			return err
		}
		acks = string(b)
	}
	args := []any{c.Cursor, leaseID, MS(c.LeaseUntil), c.LeaseLast, MS(c.LeasedAt), c.RetrySeq, c.Retries, MS(c.AvailableAt), acks, voidID, c.VoidLast, c.PartitionID, c.GroupID}
	if t.memo != nil {
		// Run now, to learn whether the row was there to keep.
		t.memo.forget(c.PartitionID, c.GroupID)
		res, err := t.Exec(ctx, SaveConsumerSQL, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n == 1 {
			t.memo.saved(c)
		}
	} else if err := t.ExecLater(ctx, SaveConsumerSQL, args...); err != nil {
		return err
	}
	// Its count up to the cursor is brought up to date later (foldCounts);
	// the cursor only moves forward.
	if t.saved == nil {
		t.saved = map[[2]int64]struct{}{}
	}
	t.saved[[2]int64{c.PartitionID, c.GroupID}] = struct{}{}
	return nil
}

// SaveConsumerSQL is SaveConsumer's statement.
const SaveConsumerSQL = `UPDATE consumers SET cursor = ?1, lease_id = ?2, lease_until = ?3, lease_last = ?4, leased_at = ?5,
		retry_seq = ?6, retries = ?7, available_at = ?8, acks = ?9, void_lease_id = ?10, void_last = ?11
		WHERE partition_id = ?12 AND group_id = ?13`

// The consumers that have a message past their cursor, among those marked
// ready (never wrongly unready: see migration 0009). The ready ones that
// turn out to have nothing past their cursor (drained since they were
// marked) are cleared on the way, each once, so that pops do not walk
// them again: a pop behind ten thousand drained partitions had taken 5.9
// ms. The test is a scalar subquery rather than EXISTS: SQLite 3.54 turns
// a correlated EXISTS into a join that costs about 15 µs a run here,
// against 0.5 µs for the same index probe as a subquery (measured; this
// is the hottest query of a pop).
//
// Each scan goes on after the last consumer the one before read (by
// leased_at, then partition_id: the order of the consumers_ready index,
// whose entries end with the primary key), so every ready consumer is
// read at most once. The scans had started from the first each time,
// counting on the drained ones being cleared; those not due yet stay
// ready, and behind 1,024 of them (the longest scan) the loop never
// ended, holding the writer.
func (t *Tx) ReadyConsumers(ctx context.Context, queueID, groupID int64, now time.Time, limit int) (out []broker.Consumer, busy bool, err error) {
	return t.readyConsumers(ctx, readyConsumersSQL, queueID, groupID, now, limit)
}

// readyConsumers is ReadyConsumers by the scan given: readyConsumersSQL,
// or readyWindowSQL with the window in ms as its ?7 (extra).
func (t *Tx) readyConsumers(ctx context.Context, scanSQL string, queueID, groupID int64, now time.Time, limit int, extra ...any) (out []broker.Consumer, busy bool, err error) {
	afterAt, afterPartition := int64(math.MinInt64), int64(math.MinInt64) // the last consumer read: none yet (a clock before 1970 gives a negative leased_at)
	for round := 0; ; round++ {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		var drained []int64
		// Each scan reads twice as far as the one before (up to 64×):
		// behind 10,000 drained partitions, 14 scans rather than 625.
		scan := ReadyScan << min(round, 6)
		// head: 0 nothing past the cursor, 1 a message that is due, 2
		// one pushed less than the queue's delayedProcessing ago (migration
		// 0011; read once, d). Without a delay the head's row is not read:
		// its seq in the index says enough.
		rows, err := t.Query(ctx, scanSQL, append([]any{queueID, groupID, MS(now), scan, afterAt, afterPartition}, extra...)...)
		if err != nil {
			return nil, false, err
		}
		read := 0
		var due []broker.Consumer // those with a head that is due, to hold (Locks.LockDue)
		for (t.locks.ScanWhole() || len(out)+len(due) < limit) && rows.Next() {
			read++
			var head int
			c, err := scanConsumer(withDest{rows, &head})
			if err != nil {
				rows.Close()
				return nil, false, err
			}
			afterAt, afterPartition = MS(c.LeasedAt), c.PartitionID
			switch head {
			case 1:
				due = append(due, c)
			case 0:
				drained = append(drained, c.PartitionID)
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, false, err
		}
		if len(drained) > 0 {
			if drained, err = t.locks.LockDrained(ctx, t, groupID, drained); err != nil {
				return nil, false, err
			}
		}
		if len(drained) > 0 {
			if _, err := t.Exec(ctx, clearReadySQL, groupID, IntsJSON(drained)); err != nil {
				return nil, false, err
			}
		}
		if len(due) > 0 {
			want := min(len(due), limit-len(out))
			got, err := t.locks.LockDue(ctx, t, groupID, due, now, want)
			if err != nil {
				return nil, false, err
			}
			out = append(out, got...)
			busy = busy || len(got) < want
		}
		// Done when enough were found, or when the scan came to the end
		// of the ready consumers.
		if len(out) >= limit || read < scan {
			return out, busy, nil
		}
	}
}

// readyConsumersSQL is ReadyConsumers' scan: the consumer's columns and
// its head (0, 1 or 2). PostgreSQL's has no boolean among integers, so
// its head without a delay is a CASE over the same probe; SQLite's keeps
// the comparison, which costs it no more instructions than before.
var readyConsumersSQL = PGQuery(`SELECT `+ConsumerCols+`,
			CASE WHEN d.delay = 0 THEN (SELECT m.seq FROM messages m WHERE m.partition_id = c.partition_id AND m.seq > c.cursor LIMIT 1) IS NOT NULL
			ELSE COALESCE((SELECT CASE WHEN m.created_at + d.delay <= ?3 THEN 1 ELSE 2 END FROM messages m
				WHERE m.partition_id = c.partition_id AND m.seq > c.cursor ORDER BY m.seq LIMIT 1), 0) END
			FROM (SELECT delayed_processing * 1000 AS delay FROM queues WHERE id = ?1) d, consumers c
			WHERE c.queue_id = ?1 AND c.group_id = ?2 AND c.ready = 1 AND (c.leased_at, c.partition_id) > (?5, ?6)
			AND (c.lease_id IS NULL OR c.lease_until <= ?3) AND c.available_at <= ?3
			ORDER BY c.leased_at, c.partition_id LIMIT ?4`, `SELECT `+ConsumerCols+`,
			CASE WHEN d.delay = 0 THEN CASE WHEN (SELECT m.seq FROM messages m WHERE m.partition_id = c.partition_id AND m.seq > c.cursor LIMIT 1) IS NOT NULL THEN 1 ELSE 0 END
			ELSE COALESCE((SELECT CASE WHEN m.created_at + d.delay <= ?3 THEN 1 ELSE 2 END FROM messages m
				WHERE m.partition_id = c.partition_id AND m.seq > c.cursor ORDER BY m.seq LIMIT 1), 0) END
			FROM (SELECT delayed_processing * 1000 AS delay FROM queues WHERE id = ?1) d, consumers c
			WHERE c.queue_id = ?1 AND c.group_id = ?2 AND c.ready = 1 AND (c.leased_at, c.partition_id) > (?5, ?6)
			AND (c.lease_id IS NULL OR c.lease_until <= ?3) AND c.available_at <= ?3
			ORDER BY c.leased_at, c.partition_id LIMIT ?4`)

// clearReadySQL clears the ready mark of consumers a scan found with
// nothing past their cursor. On PostgreSQL it looks again, on a snapshot
// of its own taken once a shared write holds their locks: a push that committed
// after the scan's snapshot keeps its consumers' mark (it could not mark
// them again: its commit is behind it). SQLite's one writer needs no
// second look.
var clearReadySQL = PGQuery(`UPDATE consumers SET ready = 0 WHERE group_id = ? AND partition_id IN (SELECT value FROM json_each(?))`,
	`UPDATE consumers SET ready = 0 WHERE group_id = ? AND partition_id IN (SELECT value::bigint FROM json_array_elements_text(?::json) AS value)
		AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.partition_id = consumers.partition_id AND m.seq > consumers.cursor)`)

// ReadyScan is how many ready consumers ReadyConsumers reads first.
const ReadyScan = 16

// withDest is a row whose Scan fills one more destination after the
// caller's.
type withDest struct {
	rows Rows
	last any
}

func (w withDest) Scan(dest ...any) error { return w.rows.Scan(append(dest, w.last)...) }

// NextWake: a consumer wakes when its lease has run out, its retry delay
// has passed and its first message past the cursor is due (pushed the
// queue's delayedProcessing ago, migration 0011): the latest of the three.
//
// Without a delay only consumers with a live lease or a retry delay are
// looked at, and whether they have a message past the cursor is read from
// the messages_partition_seq index alone, as before migration 0011. The
// head's created_at is read from its row, after the payload: with 1 MiB
// payloads a walk of its overflow pages, which had made an empty pop
// beside 50 leased partitions take 11 ms instead of 25 µs (measured:
// BenchmarkEmptyPopBesideLeasedPartitions).
//
// With a delay every ready consumer is looked at, but the head's row is
// read only for those without a live lease: a leased head was due when it
// was leased, so such a consumer wakes when its lease runs out. (Should
// delayedProcessing be raised during the lease, that wake comes before
// the head is due: the pop finds nothing, and asks again.) A consumer
// with nothing past its cursor has no wake: the multi-argument MAX of a
// NULL is NULL. Reading a head of 1 MiB costs about 0.2 ms here (50 not
// due: 10 ms for NextWake, as much again for ReadyConsumers).
func (t *Tx) NextWake(ctx context.Context, queueID, groupID int64, now time.Time) (time.Time, bool, error) {
	var next sql.NullInt64
	err := t.QueryRow(ctx, nextWakeSQL, queueID, groupID, MS(now)).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil || !next.Valid {
		return time.Time{}, false, err
	}
	return FromMS(next.Int64), true, nil
}

// nextWakeSQL is NextWake's query. PostgreSQL's GREATEST leaves NULLs
// out where SQLite's MAX of a NULL is NULL, so its head's wake is the
// subquery's own (NULL with nothing past the cursor); its subquery in
// FROM has an alias.
var nextWakeSQL = PGQuery(`SELECT CASE WHEN q.delayed_processing = 0 THEN
			(SELECT MIN(MAX(CASE WHEN c.lease_id IS NULL THEN 0 ELSE c.lease_until END, c.available_at)) FROM consumers c
			WHERE c.queue_id = ?1 AND c.group_id = ?2 AND c.ready = 1 AND ((c.lease_id IS NOT NULL AND c.lease_until > ?3) OR c.available_at > ?3)
			AND (SELECT m.seq FROM messages m WHERE m.partition_id = c.partition_id AND m.seq > c.cursor LIMIT 1) IS NOT NULL)
		ELSE
			(SELECT MIN(w) FROM (SELECT CASE WHEN c.lease_id IS NOT NULL AND c.lease_until > ?3 THEN
					CASE WHEN (SELECT m.seq FROM messages m WHERE m.partition_id = c.partition_id AND m.seq > c.cursor LIMIT 1) IS NOT NULL
					THEN MAX(c.lease_until, c.available_at) END
				ELSE MAX(c.available_at, (SELECT m.created_at FROM messages m
					WHERE m.partition_id = c.partition_id AND m.seq > c.cursor ORDER BY m.seq LIMIT 1) + q.delayed_processing * 1000) END AS w
			FROM consumers c WHERE c.queue_id = ?1 AND c.group_id = ?2 AND c.ready = 1) WHERE w > ?3)
		END
		FROM queues q WHERE q.id = ?1`,
	`SELECT CASE WHEN q.delayed_processing = 0 THEN
			(SELECT MIN(GREATEST(CASE WHEN c.lease_id IS NULL THEN 0 ELSE c.lease_until END, c.available_at)) FROM consumers c
			WHERE c.queue_id = ?1 AND c.group_id = ?2 AND c.ready = 1 AND ((c.lease_id IS NOT NULL AND c.lease_until > ?3) OR c.available_at > ?3)
			AND (SELECT m.seq FROM messages m WHERE m.partition_id = c.partition_id AND m.seq > c.cursor LIMIT 1) IS NOT NULL)
		ELSE
			(SELECT MIN(w.w) FROM (SELECT CASE WHEN c.lease_id IS NOT NULL AND c.lease_until > ?3 THEN
					CASE WHEN (SELECT m.seq FROM messages m WHERE m.partition_id = c.partition_id AND m.seq > c.cursor LIMIT 1) IS NOT NULL
					THEN GREATEST(c.lease_until, c.available_at) END
				ELSE (SELECT GREATEST(c.available_at, m.created_at + q.delayed_processing * 1000) FROM messages m
					WHERE m.partition_id = c.partition_id AND m.seq > c.cursor ORDER BY m.seq LIMIT 1) END AS w
			FROM consumers c WHERE c.queue_id = ?1 AND c.group_id = ?2 AND c.ready = 1) w WHERE w.w > ?3)
		END
		FROM queues q WHERE q.id = ?1`)

// InsertDeadLetter writes a dead_letters row for d and sets d.ID, then
// its full-text index rows (indexDeadLetter). It reads messages by its
// primary key: while d's message is kept, the row's payload is NULL and
// its pushed_at 0 (read from the message); once retention removed it (a
// restore), d.Payload and d.CreatedAt are stored in the row. On
// PostgreSQL the error text and fingerprint are stored as postgres.text has them
// (no NUL, UTF-8), and d holds them so.
//
// Then it counts d into its error group: fileErrorGroup when filed,
// returnToErrorGroup else.
func (t *Tx) InsertDeadLetter(ctx context.Context, d *broker.DeadLetter, filed bool) error {
	_, err := t.insertDeadLetter(ctx, d, filed, false)
	return err
}

// insertDeadLetter is InsertDeadLetter; with once, a dead letter whose
// message the group has in its dead letters already is not inserted
// (fileDeadLetterSQL), and inserted is false: then it does nothing more.
func (t *Tx) insertDeadLetter(ctx context.Context, d *broker.DeadLetter, filed, once bool) (inserted bool, err error) {
	query := insertDeadLetterSQL
	if once {
		query = fileDeadLetterSQL
	}
	d.Error, d.Fingerprint = t.d.Text(d.Error), t.d.Text(d.Fingerprint)
	// A dead letter restored after retention removed its message carries
	// the payload and push time it had kept (migration 0020); while the
	// message is there, they are read from it.
	d.ConsumerVersion = t.d.Text(d.ConsumerVersion)
	n, id, err := t.Insert(ctx, "id", query,
		d.Seq, d.QueueID, d.PartitionID, d.GroupID, d.Error, d.RetryCount, MS(d.FailedAt), d.TransactionID, d.ErrorBytes, d.Fingerprint, d.TraceID, []byte(d.Payload), MS(d.CreatedAt),
		d.ConsumerVersion)
	if err != nil || n == 0 {
		return false, err
	}
	d.ID = id
	if err := t.indexDeadLetter(ctx, d); err != nil {
		return true, err
	}
	if filed {
		return true, t.fileErrorGroup(ctx, d.QueueID, d.GroupID, d.Fingerprint, d.FailedAt, d.Error, d.ConsumerVersion)
	}
	return true, t.returnToErrorGroup(ctx, d.QueueID, d.GroupID, d.Fingerprint, 1, d.FailedAt, d.Error)
}

// insertDeadLetterSQL is InsertDeadLetter's statement. PostgreSQL types
// the push time's parameter by the 0 beside it in its CASE, as a 32-bit
// integer, unless cast.
var insertDeadLetterSQL = PGInsert("id", insertDeadLetterHead+insertDeadLetterSQLite, insertDeadLetterHead+insertDeadLetterPG)

const (
	insertDeadLetterHead = `INSERT INTO dead_letters (seq, queue_id, partition_id, group_id, error, retry_count, failed_at, transaction_id, error_bytes, fingerprint, trace_id, payload, pushed_at, consumer_version)
		`
	insertDeadLetterSQLite = `SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, CASE WHEN x.kept THEN NULL ELSE CAST(?12 AS BLOB) END, CASE WHEN x.kept THEN 0 ELSE ?13 END, ?14
		FROM (SELECT EXISTS (SELECT 1 FROM messages m WHERE m.seq = ?1) AS kept) x`
	insertDeadLetterPG = `SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, CASE WHEN x.kept THEN NULL ELSE CAST(?12 AS BYTEA) END, CASE WHEN x.kept THEN 0 ELSE CAST(?13 AS BIGINT) END, ?14
		FROM (SELECT EXISTS (SELECT 1 FROM messages m WHERE m.seq = ?1) AS kept) x`
)

// fileDeadLetterSQL is insertDeadLetterSQL that inserts nothing when the
// group has the message in its dead letters already (UNIQUE (seq,
// group_id)): FileEach's, run on SQLite only (PostgreSQL files an ack's
// dead letters in one statement, db/postgres/filing.go), its PostgreSQL
// text given for the catalog, which takes sqlcore's statements as both
// stores'. SQLite reads ON after a SELECT's FROM as a join's unless a
// WHERE comes between.
var fileDeadLetterSQL = PGInsert("id", insertDeadLetterHead+insertDeadLetterSQLite+unlessFiled, insertDeadLetterHead+insertDeadLetterPG+unlessFiled)

const unlessFiled = ` WHERE true ON CONFLICT (seq, group_id) DO NOTHING`

// DeadLetterSelect joins a dead letter with its message, queue, partition
// and group. The message may be gone (retention): its payload and push
// time are then the dead letter's own (migration 0020); its
// transactionId and traceId are the dead letter's always.
const DeadLetterSelect = DeadLetterCols + `dead_letters d` + DeadLetterJoins

// DeadLetterCols and DeadLetterJoins are DeadLetterSelect but its
// dead_letters d: a statement that reads them from elsewhere (an index's
// docids, a list of them) puts its own between.
const (
	DeadLetterCols = `SELECT d.id, d.seq, d.queue_id, q.name, d.partition_id, p.name, p.uuid, d.group_id, g.name,
	d.error, d.retry_count, d.failed_at, d.transaction_id, COALESCE(m.payload, d.payload), d.trace_id, COALESCE(m.created_at, d.pushed_at), d.error_bytes, d.fingerprint, d.consumer_version
	FROM `
	DeadLetterJoins = `
	LEFT JOIN messages m ON m.seq = d.seq
	JOIN queues q ON q.id = d.queue_id
	JOIN partitions p ON p.id = d.partition_id
	JOIN groups g ON g.id = d.group_id`
)

func scanDeadLetters(rows Rows) ([]broker.DeadLetter, error) {
	defer rows.Close()
	var out []broker.DeadLetter
	for rows.Next() {
		var d broker.DeadLetter
		if err := scanDeadLetter(rows, &d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// scanDeadLetter reads the row of deadLetterSelect rows is at into d.
func scanDeadLetter(rows Rows, d *broker.DeadLetter) error {
	var failed, created int64
	if err := rows.Scan(&d.ID, &d.Seq, &d.QueueID, &d.Queue, &d.PartitionID, &d.Partition, &d.PartitionKey, &d.GroupID, &d.Group,
		&d.Error, &d.RetryCount, &failed, &d.TransactionID, &d.Payload, &d.TraceID, &created, &d.ErrorBytes, &d.Fingerprint, &d.ConsumerVersion); err != nil {
		return err
	}
	d.FailedAt, d.CreatedAt = FromMS(failed), FromMS(created)
	return nil
}

// DeadLettersOfMessage reads dead_letters by UNIQUE(seq, group_id),
// joined as deadLetterSelect, by id.
func (t *Tx) DeadLettersOfMessage(ctx context.Context, seq int64) ([]broker.DeadLetter, error) {
	rows, err := t.Query(ctx, DeadLetterSelect+` WHERE d.seq = ? ORDER BY d.id`, seq)
	if err != nil {
		return nil, err
	}
	return scanDeadLetters(rows)
}

// DeadLetter reads dead_letters by the primary key, joined as
// deadLetterSelect: one whose queue, partition or group row is gone is
// not found.
func (t *Tx) DeadLetter(ctx context.Context, id int64) (broker.DeadLetter, error) {
	rows, err := t.Query(ctx, DeadLetterSelect+` WHERE d.id = ?`, id)
	if err != nil {
		return broker.DeadLetter{}, err
	}
	dls, err := scanDeadLetters(rows)
	if err != nil {
		return broker.DeadLetter{}, err
	}
	if len(dls) == 0 {
		return broker.DeadLetter{}, fmt.Errorf("dead letter: %w", broker.ErrNotFound)
	}
	return dls[0], nil
}

// MaxDeadLetterID reads the end of dead_letters' primary key. With
// AUTOINCREMENT (migration 0013) no id at or below it is given again,
// and the one writer gives a dead letter committed later a higher one.
func (t *Tx) MaxDeadLetterID(ctx context.Context) (int64, error) {
	var id int64
	err := t.QueryRow(ctx, `SELECT COALESCE(MAX(id), 0) FROM dead_letters`).Scan(&id)
	return id, err
}

// DeleteDeadLetters copies the rows into removed_dead_letters when keep
// is set (keepRemoved), removes their full-text rows
// (unindexDeadLetters), then deletes them by the primary key; ids that
// are not there: nothing.
func (t *Tx) DeleteDeadLetters(ctx context.Context, ids []int64, keep *broker.Removal) error {
	if len(ids) == 0 {
		return nil
	}
	list := IntsJSON(ids)
	if keep != nil {
		if err := t.keepRemoved(ctx, list, keep); err != nil {
			return fmt.Errorf("keep removed dead letters: %w", err)
		}
	}
	if err := t.unindexDeadLetters(ctx, list); err != nil {
		return err
	}
	_, err := t.Exec(ctx, `DELETE FROM dead_letters WHERE id IN (SELECT value FROM json_each(?))`, list)
	return err
}

// The fragments of a dead-letter filter's conditions (AddWhere); an X
// is the column written +col, out of SQLite's index choice (AddWhere
// says when).
const (
	dlOfTxid   Frag = `d.transaction_id = ?`
	dlOfTxidX  Frag = `+d.transaction_id = ?`
	dlOfQueue  Frag = `d.queue_id = ?`
	dlOfQueueX Frag = `+d.queue_id = ?`
	// The queues of a scope (a JSON array of ids): never an index's
	// choice, the other conditions name the rows.
	dlOfQueues       Frag = `+d.queue_id IN (SELECT value FROM json_each(?))`
	dlOfGroup        Frag = `d.group_id = ?`
	dlOfGroupX       Frag = `+d.group_id = ?`
	dlOfPartition    Frag = `d.partition_id = ?`
	dlOfPartitionX   Frag = `+d.partition_id = ?`
	dlOfFingerprint  Frag = `d.fingerprint = ?`
	dlOfFingerprintX Frag = `+d.fingerprint = ?`
	dlFailedFrom     Frag = `d.failed_at >= ?`
	dlFailedFromX    Frag = `+d.failed_at >= ?`
	dlFailedTo       Frag = `d.failed_at < ?`
	dlFailedToX      Frag = `+d.failed_at < ?`
	dlFailedUpTo     Frag = `d.failed_at <= ?`
	dlFailedUpToX    Frag = `+d.failed_at <= ?`
	dlErrorHas       Frag = `instr(lower(d.error), lower(?)) > 0`
	dlUpToID         Frag = `d.id <= ?`
	// broker.Filter.Cap: a dead letter's message's depth (a probe of
	// replays' primary key) against its queue's max_replays (a probe of
	// queues').
	dlCapAt    Frag = `EXISTS (SELECT 1 FROM replays r JOIN queues q ON q.id = d.queue_id WHERE r.copy_seq = d.seq AND q.max_replays > 0 AND r.depth >= q.max_replays)`
	dlCapBelow Frag = `NOT ` + dlCapAt
	// A version: the partial index dead_letters_version holds only the
	// rows with one, and its condition is written out for SQLite to see
	// that it may use it.
	dlOfVersion  Frag = `d.consumer_version = ? AND d.consumer_version <> ''`
	dlOfVersionX Frag = `+d.consumer_version = ?`
	// Keyset bounds, newest failure first.
	dlBefore Frag = `(d.failed_at, d.id) < (?, ?)`
	dlFrom   Frag = `(d.failed_at, d.id) >= (?, ?)`
)

// AddWhere adds the conditions of a dead-letter filter to s (Cond).
// Values go in as arguments, never into the SQL text.
//
// A transactionId names a handful of dead letters at most: its index
// (transaction_id, failed_at, id) is the one to search, whatever else
// the filter says. SQLite keeps no statistics here to know that, and
// would rather walk a whole queue in failed_at order through the queue's
// index (1M rows for one match), so the other columns are then written
// +col, which keeps them out of index choice and leaves their meaning.
// An error group (fingerprint) is searched the same way by its index
// (queue_id, fingerprint, failed_at, id): the group and partition are
// then +col, else SQLite may take (queue_id, group_id, ...) and read the
// whole consumer group for a small error group.
// A consumer version is searched the same way by dead_letters_version
// (queue_id, consumer_version, failed_at, id) unless an error group is
// asked for too (its index then, the version +col).
//
// named: the rows are named by something else (a full-text index's
// docids joined by id or seq), so every column is +col, out of index
// choice.
func AddWhere(s *Stmt, f broker.Filter, named bool) {
	// x reports whether column c is written +c.
	x := func(string) bool { return false }
	if named {
		x = func(string) bool { return true }
		if f.TransactionID != "" {
			s.Cond(dlOfTxidX, f.TransactionID)
		}
	} else if f.TransactionID != "" {
		s.Cond(dlOfTxid, f.TransactionID)
		x = func(string) bool { return true }
	} else if (f.Indexed() || f.ErrorWords != "") && f.Floor == nil && f.Window == nil {
		// The full-text index names the candidates (broker.MatchCap at
		// most in a list): looked up by id or seq, never found by walking
		// a queue's dead letters in order (all of them for a rare word),
		// nor an error group's.
		x = func(string) bool { return true }
	} else if f.Fingerprint != "" && f.QueueID != 0 {
		x = func(c string) bool { return c == "d.group_id" || c == "d.partition_id" || c == "d.consumer_version" }
	} else if f.ConsumerVersion != "" && f.QueueID != 0 {
		x = func(c string) bool { return c == "d.group_id" || c == "d.partition_id" }
	}
	col := func(c string, plain, plus Frag) Frag {
		if x(c) {
			return plus
		}
		return plain
	}
	if f.QueueID != 0 {
		s.Cond(col("d.queue_id", dlOfQueue, dlOfQueueX), f.QueueID)
	}
	if f.QueueIDs != nil {
		s.Cond(dlOfQueues, IntsJSON(f.QueueIDs))
	}
	if f.GroupID != 0 {
		s.Cond(col("d.group_id", dlOfGroup, dlOfGroupX), f.GroupID)
	}
	if f.PartitionID != 0 {
		s.Cond(col("d.partition_id", dlOfPartition, dlOfPartitionX), f.PartitionID)
	}
	if f.Fingerprint != "" {
		s.Cond(col("d.fingerprint", dlOfFingerprint, dlOfFingerprintX), f.Fingerprint)
	}
	if f.ConsumerVersion != "" {
		s.Cond(col("d.consumer_version", dlOfVersion, dlOfVersionX), f.ConsumerVersion)
	}
	if !f.From.IsZero() {
		s.Cond(col("d.failed_at", dlFailedFrom, dlFailedFromX), MS(f.From))
	}
	if !f.To.IsZero() {
		s.Cond(col("d.failed_at", dlFailedTo, dlFailedToX), MS(f.To))
	}
	if f.ErrorContains != "" {
		s.Cond(dlErrorHas, f.ErrorContains)
	}
	if f.MaxID != 0 {
		s.Cond(dlUpToID, f.MaxID)
	}
	if !f.MaxFailedAt.IsZero() {
		s.Cond(col("d.failed_at", dlFailedUpTo, dlFailedUpToX), MS(f.MaxFailedAt))
	}
	switch {
	case f.Cap == broker.CapAt:
		s.Cond(dlCapAt)
	case f.Cap != 0:
		s.Cond(dlCapBelow)
	}
	searchConds(s, f)
}

// deadLetterStmt is head (a SELECT … FROM dead_letters d …) with the
// conditions of f (AddWhere).
func deadLetterStmt(head Frag, f broker.Filter) Stmt {
	var s Stmt
	s.Add(head)
	AddWhere(&s, f, false)
	return s
}

// The heads and ends of the dead-letter filters' statements.
const (
	dlSelect        Frag = DeadLetterSelect
	dlCount         Frag = `SELECT COUNT(*) FROM dead_letters d`
	dlCountUpToHead Frag = `SELECT COUNT(*) FROM (SELECT 1 FROM dead_letters d`
	dlCountUpToEnd  Frag = ` LIMIT ?) x`
	dlNewestFirst   Frag = ` ORDER BY d.failed_at DESC, d.id DESC LIMIT ?`
)

// ListDeadLetters reads deadLetterSelect with where(f), newest failure
// first (failed_at, then id, descending), after the keyset p.After or
// past p.Offset rows.
func (t *Tx) ListDeadLetters(ctx context.Context, f broker.Filter, p broker.Page) ([]broker.DeadLetter, error) {
	s := deadLetterStmt(dlSelect, f)
	if p.After != nil {
		s.Cond(dlBefore, MS(p.After.At), p.After.ID)
	}
	s.Add(dlNewestFirst, p.Limit)
	if p.After == nil && p.Offset > 0 {
		s.Add(fragOffset, p.Offset)
	}
	rows, err := t.QueryStmt(ctx, &s)
	if err != nil {
		return nil, err
	}
	return scanDeadLetters(rows)
}

// CountDeadLetters counts the rows of where(f): a walk of the filter's
// index, unbounded.
func (t *Tx) CountDeadLetters(ctx context.Context, f broker.Filter) (int64, error) {
	s := deadLetterStmt(dlCount, f)
	var n int64
	err := t.QueryRowStmt(ctx, &s).Scan(&n)
	return n, err
}

// CountDeadLettersUpTo counts the rows of where(f) up to max (a LIMIT
// inside the count).
func (t *Tx) CountDeadLettersUpTo(ctx context.Context, f broker.Filter, max int) (int64, error) {
	s := deadLetterStmt(dlCountUpToHead, f)
	s.Add(dlCountUpToEnd, max)
	var n int64
	err := t.QueryRowStmt(ctx, &s).Scan(&n)
	return n, err
}

// InsertAudit inserts a row of audit and takes its rowid as a.ID.
func (t *Tx) InsertAudit(ctx context.Context, a *broker.AuditEntry) error {
	var err error
	_, a.ID, err = t.Insert(ctx, "id", `INSERT INTO audit (at, actor, action, queue, group_name, count, detail, job_id, broker) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		MS(a.At), a.Actor, a.Action, a.Queue, a.Group, a.Count, a.Detail, a.JobID, B2I(a.Broker))
	return err
}

// The fragments of ListAudit's statement (AuditStmt) but those Jobs'
// has too.
const (
	auditSelect   Frag = `SELECT id, at, actor, action, queue, group_name, count, detail, job_id, broker FROM audit`
	auditOfAction Frag = `action = ?`
	auditOfBroker Frag = `broker = 1`
	auditOfPeople Frag = `broker = 0`
	auditOfJob    Frag = `job_id = ?`
	auditOfActor  Frag = `actor = ?`
	// One of the queues of a comma-separated list.
	auditOfQueue Frag = `instr(','||queue||',', ','||?||',') > 0`
)

// auditExcept leaves out the actions of a JSON array of strings
// (PostgreSQL's json_array_elements_text reads them: its text-typed
// value keeps them apart from an array of ids, read as bigint).
var auditExcept = PGFrag(`action NOT IN (SELECT j.value FROM json_each(?) j)`,
	`action NOT IN (SELECT j.value FROM json_array_elements_text(CAST(? AS json)) AS j(value))`)

// AuditStmt is ListAudit's statement: newest first by the primary key,
// on audit_stream within a stream.
func AuditStmt(f broker.AuditFilter, p broker.Page) Stmt {
	var s Stmt
	s.Add(auditSelect)
	if f.Action != "" {
		s.Cond(auditOfAction, f.Action)
	}
	// The people's stream or the broker's (audit_stream): an action
	// filter alone says which.
	switch {
	case f.Stream == broker.AuditStreamBroker:
		s.Cond(auditOfBroker)
	case f.Stream == broker.AuditStreamPeople && f.Action == "":
		s.Cond(auditOfPeople)
	}
	if f.JobID != 0 {
		s.Cond(auditOfJob, f.JobID)
	}
	if f.Actor != "" {
		s.Cond(auditOfActor, f.Actor)
	}
	if f.Queue != "" {
		s.Cond(auditOfQueue, f.Queue)
	}
	if len(f.Except) > 0 {
		s.Cond(auditExcept, jsonStrings(f.Except))
	}
	if p.After != nil {
		s.Cond(idBefore, p.After.ID)
	}
	s.Add(idNewestFirst, p.Limit)
	if p.After == nil && p.Offset > 0 {
		s.Add(fragOffset, p.Offset)
	}
	return s
}

// jsonStrings is ss as a JSON array.
func jsonStrings(ss []string) string {
	b, _ := json.Marshal(ss) // strings always marshal
	return string(b)
}

// ListAudit runs AuditStmt: newest first by the primary key.
func (t *Tx) ListAudit(ctx context.Context, f broker.AuditFilter, p broker.Page) ([]broker.AuditEntry, error) {
	s := AuditStmt(f, p)
	rows, err := t.QueryStmt(ctx, &s)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.AuditEntry
	for rows.Next() {
		var a broker.AuditEntry
		var at int64
		if err := rows.Scan(&a.ID, &at, &a.Actor, &a.Action, &a.Queue, &a.Group, &a.Count, &a.Detail, &a.JobID, &a.Broker); err != nil {
			return nil, err
		}
		a.At = FromMS(at)
		out = append(out, a)
	}
	return out, rows.Err()
}

// PartitionList reads partitions by UNIQUE(queue_id, name), without
// counting.
func (t *Tx) PartitionList(ctx context.Context, queueID int64) ([]broker.Partition, error) {
	rows, err := t.Query(ctx, `SELECT `+partitionCols+` FROM partitions WHERE queue_id = ? ORDER BY name`, queueID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.Partition
	for rows.Next() {
		p, err := scanPartition(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// GroupNames reads subscriptions by its key prefix (queue_id), joined to
// groups, by name.
func (t *Tx) GroupNames(ctx context.Context, queueID int64) ([]string, error) {
	rows, err := t.Query(ctx, `SELECT g.name FROM subscriptions s JOIN groups g ON g.id = s.group_id WHERE s.queue_id = ? ORDER BY g.name`, queueID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
