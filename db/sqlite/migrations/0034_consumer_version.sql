-- The consumer's version (SPEC.md section 7): an ack may say which
-- version of the consumer sent it ("consumerVersion", at most 64 bytes of
-- UTF-8 with no control characters, checked by the broker). It is kept
-- where the failure is kept, so that a dead letter says which version
-- gave up on it and an error group which versions filed into it.
--
-- consumer_version: '' when the ack said none (Queen's clients never
-- do), and for every row written before this migration.
ALTER TABLE attempts ADD COLUMN consumer_version TEXT NOT NULL DEFAULT '';
ALTER TABLE dead_letters ADD COLUMN consumer_version TEXT NOT NULL DEFAULT '';
-- A deleted dead letter keeps it for its restore.
ALTER TABLE removed_dead_letters ADD COLUMN consumer_version TEXT NOT NULL DEFAULT '';

-- The list of a queue's dead letters filtered by version, newest first
-- (and a bulk action or export by that filter): an index read within the
-- queue. Partial: the dead letters of consumers that say no version
-- (most, and all of Queen's) cost it nothing; the filter's statement
-- says consumer_version <> '' so that SQLite may use it.
CREATE INDEX dead_letters_version ON dead_letters (queue_id, consumer_version, failed_at DESC, id DESC)
    WHERE consumer_version <> '';

-- The versions that filed dead letters into each error group (queue,
-- consumer group, fingerprint as error_groups keys it): how many, and
-- when first and last (ms), upserted in the transaction of the filing.
-- A filing whose ack said no version writes nothing here. Rows are left
-- when their error group's row goes away (its dead letters all replayed
-- or deleted): they are bounded by the groups a queue ever had times the
-- versions that filed into each, and a group that comes back shows the
-- versions that filed into it before. Deleting the queue deletes them.
CREATE TABLE error_group_versions (
    queue_id    INTEGER NOT NULL,
    group_id    INTEGER NOT NULL,
    fingerprint TEXT    NOT NULL,
    version     TEXT    NOT NULL,
    filed       INTEGER NOT NULL,
    first_seen  INTEGER NOT NULL,
    last_seen   INTEGER NOT NULL,
    PRIMARY KEY (queue_id, group_id, fingerprint, version)
) STRICT, WITHOUT ROWID;
