-- Error groups: dead letters grouped by a fingerprint of their error
-- (broker.Fingerprint: the first line with ids, numbers, UUIDs, timestamps
-- and quoted values masked), kept as events happen, as the depths are.
--
-- The fingerprint of a dead letter is computed once, when it is filed,
-- and stored: a group's members are found by the index, and a later
-- Lazarus whose rules mask more does not move old dead letters between
-- groups behind the kept counts' back.
ALTER TABLE dead_letters ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';

-- The existing dead letters: lazarus_fingerprint is broker.Fingerprint,
-- registered on every connection (db/driver.go) as a deterministic SQL
-- function for this statement. A PostgreSQL store will backfill in Go
-- (read the errors in keyset pages, write the fingerprints back), as it
-- has no such function.
UPDATE dead_letters SET fingerprint = lazarus_fingerprint(error);

-- A group's dead letters, newest first: the list filtered by fingerprint,
-- and a bulk replay or delete of a group.
CREATE INDEX dead_letters_fingerprint ON dead_letters (queue_id, fingerprint, failed_at DESC, id DESC);

-- The kept counts of the groups of each queue and consumer group. A row
-- lives while its group holds dead letters (one is deleted at 0): the
-- table is bounded by the dead letters. first_failed_at and
-- last_failed_at are when the group's first and newest dead letters were
-- filed since the row was made; replays and deletes do not move them.
-- sample_error is the newest full error text filed into the group.
-- A rowid table: sample_error may be 8 KiB, too big for WITHOUT ROWID.
CREATE TABLE error_groups (
    queue_id        INTEGER NOT NULL,
    group_id        INTEGER NOT NULL,
    fingerprint     TEXT    NOT NULL,
    dead_letters    INTEGER NOT NULL,
    first_failed_at INTEGER NOT NULL,
    last_failed_at  INTEGER NOT NULL,
    sample_error    TEXT    NOT NULL,
    PRIMARY KEY (queue_id, group_id, fingerprint)
) STRICT;
-- the biggest groups of a queue's consumer group first
CREATE INDEX error_groups_top ON error_groups (queue_id, group_id, dead_letters DESC, fingerprint);

-- Dead letters filed per group and hour (unix time / 3600), for the 24 h
-- trend; swept past 48 h by the stats compaction (broker.ErrorGroupHourRetention).
CREATE TABLE error_group_hours (
    queue_id    INTEGER NOT NULL,
    group_id    INTEGER NOT NULL,
    fingerprint TEXT    NOT NULL,
    hour        INTEGER NOT NULL,
    filed       INTEGER NOT NULL,
    PRIMARY KEY (queue_id, group_id, fingerprint, hour)
) STRICT, WITHOUT ROWID;
CREATE INDEX error_group_hours_sweep ON error_group_hours (hour);

-- The one time the groups are counted: from the dead letters there are.
INSERT INTO error_groups (queue_id, group_id, fingerprint, dead_letters, first_failed_at, last_failed_at, sample_error)
SELECT d.queue_id, d.group_id, d.fingerprint, COUNT(*), MIN(d.failed_at), MAX(d.failed_at),
    (SELECT x.error FROM dead_letters x WHERE x.queue_id = d.queue_id AND x.fingerprint = d.fingerprint AND x.group_id = d.group_id
        ORDER BY x.failed_at DESC, x.id DESC LIMIT 1)
FROM dead_letters d GROUP BY d.queue_id, d.group_id, d.fingerprint;

-- The trend of the 48 hours before the newest dead letter (the sweep keeps
-- no more; the migration has no clock of its own).
INSERT INTO error_group_hours (queue_id, group_id, fingerprint, hour, filed)
SELECT queue_id, group_id, fingerprint, failed_at / 3600000 AS hour, COUNT(*)
FROM dead_letters
WHERE failed_at >= (SELECT MAX(failed_at) FROM dead_letters) - 48 * 3600000
GROUP BY queue_id, group_id, fingerprint, hour;

-- The error groups replace the counts by first line (0006).
DROP TABLE error_counts;
