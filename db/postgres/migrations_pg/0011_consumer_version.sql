-- The consumer's version of an ack, kept with failed attempts, dead
-- letters (and deleted ones) and per error group: SQLite's migration
-- 0034 says what each column holds, and how the table is bounded.
ALTER TABLE attempts ADD COLUMN consumer_version TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE dead_letters ADD COLUMN consumer_version TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE removed_dead_letters ADD COLUMN consumer_version TEXT COLLATE "C" NOT NULL DEFAULT '';

CREATE INDEX dead_letters_version ON dead_letters (queue_id, consumer_version, failed_at DESC, id DESC)
    WHERE consumer_version <> '';

CREATE TABLE error_group_versions (
    queue_id    BIGINT NOT NULL,
    group_id    BIGINT NOT NULL,
    fingerprint TEXT COLLATE "C" NOT NULL,
    version     TEXT COLLATE "C" NOT NULL,
    filed       BIGINT NOT NULL,
    first_seen  BIGINT NOT NULL,
    last_seen   BIGINT NOT NULL,
    PRIMARY KEY (queue_id, group_id, fingerprint, version)
);
