-- Holds (SPEC section 6, broker/hold.go): a queue, or one consumer group
-- of it, whose pops deliver nothing while a row here names it. One row a
-- (queue, group, kind): group_id 0 holds the whole queue; kind 'manual'
-- (a person's, POST /api/v1/holds) or 'breaker' (the circuit breaker's,
-- which also keeps its probe in probe_*). A release deletes the row (the
-- audit keeps the history), and deleting a queue deletes its rows
-- (DeleteQueue): the table is bounded by (queue, group, kind), no sweep
-- (STORAGE rule 7). AUTOINCREMENT: an id is never given twice, so a
-- DELETE /holds/:id retried after a release cannot release a later hold.
CREATE TABLE holds (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    queue_id           INTEGER NOT NULL,
    group_id           INTEGER NOT NULL DEFAULT 0,  -- 0: the whole queue
    kind               TEXT    NOT NULL,            -- 'manual' | 'breaker'
    reason             TEXT    NOT NULL,
    actor              TEXT    NOT NULL,
    since              INTEGER NOT NULL,            -- ms
    probe_at           INTEGER NOT NULL DEFAULT 0,  -- breaker: next probe due (ms); 0 none
    probe_partition_id INTEGER NOT NULL DEFAULT 0,  -- breaker: the probe in flight
    probe_seq          INTEGER NOT NULL DEFAULT 0,
    probes             INTEGER NOT NULL DEFAULT 0,  -- breaker: probes handed out
    UNIQUE (queue_id, group_id, kind)
);

-- The circuit breaker's count of failed tries in a row, per (queue,
-- group): not on subscriptions, whose updates move PostgreSQL's cache
-- generation. Bounded by (queue, group); deleted with its queue.
CREATE TABLE group_breakers (
    queue_id   INTEGER NOT NULL,
    group_id   INTEGER NOT NULL,
    streak     INTEGER NOT NULL DEFAULT 0,  -- failed tries in a row
    last_error TEXT    NOT NULL DEFAULT '',
    last_at    INTEGER NOT NULL DEFAULT 0,  -- ms
    PRIMARY KEY (queue_id, group_id)
);

-- The circuit breaker's queue options (holdAfterFailures 0: off).
ALTER TABLE queues ADD COLUMN hold_after_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN hold_probe_seconds  INTEGER NOT NULL DEFAULT 30;

-- A replay job's canary (JSON, broker's; '' none), and the copies a
-- replay job found there already (a duplicate: nothing new made).
ALTER TABLE jobs ADD COLUMN canary     TEXT    NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN duplicates INTEGER NOT NULL DEFAULT 0;
