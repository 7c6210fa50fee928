-- Dead letters' row ids are never handed out again. A bulk action by
-- filter keeps to a bound (broker.Bound): the dead letters with a row id
-- at most the highest when the bound was taken. Without AUTOINCREMENT
-- SQLite gives a new row the highest id in the table plus one, so once
-- the highest rows are deleted or replayed (a bulk action removes the
-- newest first) a dead letter filed later could take an id at or below a
-- bound and be touched by an action that never counted it. With
-- AUTOINCREMENT a new id is above every id the table ever had
-- (sqlite_sequence keeps the highest). A PostgreSQL store (not built
-- yet) must keep the same promise: an identity column never hands an id
-- out twice, but with several writers ids commit out of order, so a row
-- may appear after a bound was taken with an id below it; its bound needs
-- more than the highest id (e.g. the snapshot's xmin, or a lock).
--
-- SQLite cannot add AUTOINCREMENT to a table: this is its documented
-- rebuild (new table, copy, drop, rename, indexes again), all in the
-- migration's transaction. Foreign keys are off on every connection, and
-- no trigger or view names dead_letters; the ids are kept, so that the
-- audit's bounds and open confirmations still name the same rows.
CREATE TABLE dead_letters_0013 (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    seq            INTEGER NOT NULL,
    queue_id       INTEGER NOT NULL,
    partition_id   INTEGER NOT NULL,
    group_id       INTEGER NOT NULL,
    error          TEXT    NOT NULL,
    retry_count    INTEGER NOT NULL,
    failed_at      INTEGER NOT NULL,
    transaction_id TEXT    NOT NULL DEFAULT '',
    UNIQUE (seq, group_id)
) STRICT;
INSERT INTO dead_letters_0013 (id, seq, queue_id, partition_id, group_id, error, retry_count, failed_at, transaction_id)
    SELECT id, seq, queue_id, partition_id, group_id, error, retry_count, failed_at, transaction_id FROM dead_letters;
DROP TABLE dead_letters;
ALTER TABLE dead_letters_0013 RENAME TO dead_letters;
-- newest first: across queues, in a queue, in a queue's group (keyset pages)
CREATE INDEX dead_letters_failed ON dead_letters (failed_at DESC, id DESC);
CREATE INDEX dead_letters_queue ON dead_letters (queue_id, failed_at DESC, id DESC);
CREATE INDEX dead_letters_group ON dead_letters (queue_id, group_id, failed_at DESC, id DESC);
CREATE INDEX dead_letters_transaction ON dead_letters (transaction_id, failed_at DESC, id DESC);

-- The copy leaves sqlite_sequence at the highest id left, but the highest
-- ever may have been deleted or replayed before this migration (and a
-- bound taken then may be sent after it). SQLite kept no record of it;
-- every id it gave was at most the number of dead letters filed until
-- then, which the running totals of the queues keep (dead_lettered only
-- grows): the ids go on above both. Only the dead letters of queues
-- deleted since (their totals went with them) are not counted there.
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'dead_letters', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'dead_letters');
UPDATE sqlite_sequence SET seq = max(seq,
        (SELECT COALESCE(MAX(id), 0) FROM dead_letters),
        (SELECT COALESCE(SUM(dead_lettered), 0) FROM group_stats))
    WHERE name = 'dead_letters';
