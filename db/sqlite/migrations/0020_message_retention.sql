-- Message retention (issue 16: completedRetentionSeconds, retentionSeconds;
-- broker/retention.go, db/tx_retention.go).
--
-- A dead letter keeps its payload once its message goes: the sweep that
-- deletes a chunk of messages first copies each one's payload and push
-- time into its dead letters (every group's) and deleted dead letters
-- still kept, in the same transaction. payload NULL: still in messages
-- (the reads take COALESCE(m.payload, d.payload) through a LEFT JOIN);
-- pushed_at 0: likewise, the message's created_at is read. The
-- transactionId and traceId are the dead letter's own already (0008,
-- 0016). The payload is not copied while the message is kept: a dead
-- letter costs no more than before until retention removes its message.
ALTER TABLE dead_letters ADD COLUMN payload BLOB;
ALTER TABLE dead_letters ADD COLUMN pushed_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE removed_dead_letters ADD COLUMN payload BLOB;
ALTER TABLE removed_dead_letters ADD COLUMN pushed_at INTEGER NOT NULL DEFAULT 0;

-- Settle marks of completedRetentionSeconds: a partition's settled
-- watermark (the lowest cursor of its consumers: every group has
-- settled every message up to it) as the sweep saw it at `at`. A mark
-- older than the queue's completed retention lets the sweep delete the
-- partition's messages up to its seq: each of them was settled by every
-- group at or before `at`. A mark is written when the watermark has
-- moved past the partition's last mark and that mark is older than a
-- slot (the retention / 8, at least the maintenance interval), so a
-- partition has at most about 9 marks; a mark goes once its messages
-- are deleted, and with its queue. Bound: 9 rows a partition.
CREATE TABLE settle_marks (
    partition_id INTEGER NOT NULL,
    at           INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    queue_id     INTEGER NOT NULL,
    PRIMARY KEY (partition_id, at)
) STRICT, WITHOUT ROWID;
-- the marks of a queue due for deletion: older than its retention
CREATE INDEX settle_marks_due ON settle_marks (queue_id, at);

-- A replayed copy that retentionSeconds deleted before a group that is
-- to settle it had (replay_outcomes.outcome 3, expired): it leaves the
-- job's pending copies as expired, so that a job page does not wait for
-- it for ever.
ALTER TABLE job_outcomes ADD COLUMN expired INTEGER NOT NULL DEFAULT 0;

-- A replay records what the history page needs of the message it copied
-- (its push time, transactionId and partition), so that the history of a
-- replayed message still reads once retention removed the message and
-- the replay its dead letters. The replays made before this migration
-- get them from their messages here (every message is still kept: no
-- retention ran before), so that completedRetentionSeconds, on by
-- default from now on, does not take their reference. 0 / '': a replay
-- whose message was gone already (its queue deleted).
ALTER TABLE replays ADD COLUMN original_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replays ADD COLUMN original_txid TEXT NOT NULL DEFAULT '';
ALTER TABLE replays ADD COLUMN partition_id INTEGER NOT NULL DEFAULT 0;
UPDATE replays SET original_at = m.created_at, original_txid = m.transaction_id, partition_id = m.partition_id
    FROM messages m WHERE m.seq = replays.seq;
