-- The broker's state. Times are Unix milliseconds (UTC).

CREATE TABLE queues (
    id                    INTEGER PRIMARY KEY,
    name                  TEXT    NOT NULL UNIQUE,
    lease_time            INTEGER NOT NULL,
    retry_limit           INTEGER NOT NULL,
    retry_delay           INTEGER NOT NULL,
    dead_letter_queue     INTEGER NOT NULL,
    dlq_after_max_retries INTEGER NOT NULL,
    created_at            INTEGER NOT NULL
) STRICT;

CREATE TABLE partitions (
    id         INTEGER PRIMARY KEY,
    queue_id   INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    uuid       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    UNIQUE (queue_id, name)
) STRICT;

CREATE TABLE groups (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
) STRICT;

-- A group reads a queue from its first pop on.
CREATE TABLE subscriptions (
    queue_id      INTEGER NOT NULL,
    group_id      INTEGER NOT NULL,
    subscribed_at INTEGER NOT NULL,
    PRIMARY KEY (queue_id, group_id)
) STRICT, WITHOUT ROWID;

-- seq is the push order (one writer: it only grows).
CREATE TABLE messages (
    seq            INTEGER PRIMARY KEY,
    partition_id   INTEGER NOT NULL,
    transaction_id TEXT    NOT NULL,
    payload        BLOB    NOT NULL,
    trace_id       TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    UNIQUE (partition_id, transaction_id)
) STRICT;
-- pop: the next messages of a partition past a cursor
CREATE INDEX messages_partition_seq ON messages (partition_id, seq);

-- One row per (partition, group): the group's cursor, lease and retry state.
CREATE TABLE consumers (
    partition_id INTEGER NOT NULL,
    group_id     INTEGER NOT NULL,
    queue_id     INTEGER NOT NULL,
    cursor       INTEGER NOT NULL DEFAULT 0,
    lease_id     TEXT,
    lease_until  INTEGER NOT NULL DEFAULT 0,
    lease_last   INTEGER NOT NULL DEFAULT 0,
    leased_at    INTEGER NOT NULL DEFAULT 0,
    retry_seq    INTEGER NOT NULL DEFAULT 0,
    retries      INTEGER NOT NULL DEFAULT 0,
    available_at INTEGER NOT NULL DEFAULT 0,
    acks         TEXT,    -- JSON: acks waiting for an earlier message of the lease
    void_lease_id TEXT,   -- a lease ended by a failure in its batch
    void_last    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (partition_id, group_id)
) STRICT, WITHOUT ROWID;
-- pop without a partition: the group's consumers in a queue, least recently leased first
CREATE INDEX consumers_ready ON consumers (queue_id, group_id, leased_at);
-- ack and extend by lease id
CREATE UNIQUE INDEX consumers_lease ON consumers (lease_id) WHERE lease_id IS NOT NULL;

CREATE TABLE dead_letters (
    id           INTEGER PRIMARY KEY,
    seq          INTEGER NOT NULL,
    queue_id     INTEGER NOT NULL,
    partition_id INTEGER NOT NULL,
    group_id     INTEGER NOT NULL,
    error        TEXT    NOT NULL,
    retry_count  INTEGER NOT NULL,
    failed_at    INTEGER NOT NULL,
    UNIQUE (seq, group_id)
) STRICT;
-- newest first: across queues, in a queue, in a queue's group (keyset pages)
CREATE INDEX dead_letters_failed ON dead_letters (failed_at DESC, id DESC);
CREATE INDEX dead_letters_queue ON dead_letters (queue_id, failed_at DESC, id DESC);
CREATE INDEX dead_letters_group ON dead_letters (queue_id, group_id, failed_at DESC, id DESC);

-- Running totals per queue and group, kept with the events.
CREATE TABLE group_stats (
    queue_id      INTEGER NOT NULL,
    group_id      INTEGER NOT NULL,
    depth         INTEGER NOT NULL DEFAULT 0,
    dead_lettered INTEGER NOT NULL DEFAULT 0,
    replayed      INTEGER NOT NULL DEFAULT 0,
    deleted       INTEGER NOT NULL DEFAULT 0,
    dropped       INTEGER NOT NULL DEFAULT 0,
    completed     INTEGER NOT NULL DEFAULT 0,
    failed        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, group_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE audit (
    id         INTEGER PRIMARY KEY,
    at         INTEGER NOT NULL,
    actor      TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    queue      TEXT    NOT NULL,
    group_name TEXT    NOT NULL,
    count      INTEGER NOT NULL,
    detail     TEXT    NOT NULL
) STRICT;
