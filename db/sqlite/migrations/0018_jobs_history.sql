-- Replays you can prove (issue 15): bulk actions as jobs, the outcome of
-- every replayed copy, a dead letter's history, replay to one group,
-- edit and replay, and deletes that can be undone for a while. Every
-- table here has its bound: a sweep in the maintenance task
-- (broker.SweepHistory), documented in the README's table of what grows.

-- A bulk replay, delete or restore, run in the background a chunk a
-- transaction; each chunk's work and the job's progress commit together,
-- so that a job resumes at the next start exactly where it stopped.
CREATE TABLE jobs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    kind          TEXT    NOT NULL,            -- replay, delete, restore
    state         TEXT    NOT NULL,            -- running, paused, cancelled, done, failed
    actor         TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    finished_at   INTEGER NOT NULL DEFAULT 0,
    queue         TEXT    NOT NULL,            -- the queue's name; '' every queue
    scope         TEXT    NOT NULL,            -- JSON: what it acts on (broker.JobScope)
    description   TEXT    NOT NULL,            -- the scope in words
    rate          INTEGER NOT NULL DEFAULT 0,  -- messages a second at most; 0 no limit
    planned       INTEGER NOT NULL,
    done          INTEGER NOT NULL DEFAULT 0,
    skipped       INTEGER NOT NULL DEFAULT 0,
    failed        INTEGER NOT NULL DEFAULT 0,
    arrived_since INTEGER NOT NULL DEFAULT -1, -- -1: not counted (yet)
    position      INTEGER NOT NULL DEFAULT 0,  -- a job by ids: how many of them it has taken
    reason        TEXT    NOT NULL DEFAULT '', -- why it paused, failed or was cancelled
    pause_percent INTEGER NOT NULL DEFAULT 20, -- auto-pause: more than this share of
    pause_window  INTEGER NOT NULL DEFAULT 50, --   the last pause_window settled copies failed again
    recent        INTEGER NOT NULL DEFAULT 0,  -- the last settled copies, a bit each (1: failed again), newest lowest
    recent_n      INTEGER NOT NULL DEFAULT 0,  -- how many bits of recent count (at most pause_window)
    undo_of       INTEGER NOT NULL DEFAULT 0,  -- a restore: the delete job it undoes
    undone_by     INTEGER NOT NULL DEFAULT 0   -- a delete: the restore job that undid it
) STRICT;
-- the jobs to resume at start, and the list filtered by state
CREATE INDEX jobs_state ON jobs (state, id);

-- A replay job's outcomes per consumer group, kept as copies settle:
-- copies the group is to settle (replayed), and how many it completed
-- (succeeded) or dead-lettered or dropped again (failed). Pending is
-- replayed - succeeded - failed.
CREATE TABLE job_outcomes (
    job_id    INTEGER NOT NULL,
    group_id  INTEGER NOT NULL,
    replayed  INTEGER NOT NULL DEFAULT 0,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, group_id)
) STRICT, WITHOUT ROWID;

-- The outcome of a copy in a group is now kept, not forgotten, once
-- counted: 0 pending, 1 succeeded, 2 failed again; with the job that
-- replayed it (0: a single replay) and when it settled.
ALTER TABLE replay_outcomes ADD COLUMN job_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_outcomes ADD COLUMN outcome INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_outcomes ADD COLUMN settled_at INTEGER NOT NULL DEFAULT 0;
-- a job's copies that failed again, and those of a job to sweep
CREATE INDEX replay_outcomes_job ON replay_outcomes (job_id, outcome) WHERE job_id > 0;

-- Every replayed copy: the message it copies (its dead letters' seq), who
-- replayed it and when, by which job, for which group (0: every group
-- that reads the partition; else only that group reads the copy, and the
-- others pass it by), and whether its payload was edited. The lineage of
-- a message (the dlq: chain) is read from here, in both directions.
CREATE TABLE replays (
    copy_seq INTEGER PRIMARY KEY,
    seq      INTEGER NOT NULL,
    group_id INTEGER NOT NULL DEFAULT 0,
    job_id   INTEGER NOT NULL DEFAULT 0,
    actor    TEXT    NOT NULL,
    at       INTEGER NOT NULL,
    edited   INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX replays_seq ON replays (seq);

-- Edit and replay keeps both versions, whatever becomes of the messages.
CREATE TABLE replay_edits (
    copy_seq INTEGER PRIMARY KEY,
    original BLOB NOT NULL,
    edited   BLOB NOT NULL
) STRICT;

-- Dead letters that were deleted: kept whole, and restorable, until
-- restore_until; then cut to what the dead letter's page needs to say
-- what happened (restore_until 0, error ''), until the history sweep.
CREATE TABLE removed_dead_letters (
    id             INTEGER PRIMARY KEY,
    dead_letter_id INTEGER NOT NULL,
    seq            INTEGER NOT NULL,
    queue_id       INTEGER NOT NULL,
    partition_id   INTEGER NOT NULL,
    group_id       INTEGER NOT NULL,
    error          TEXT    NOT NULL,
    error_bytes    INTEGER NOT NULL,
    retry_count    INTEGER NOT NULL,
    failed_at      INTEGER NOT NULL,
    transaction_id TEXT    NOT NULL,
    trace_id       TEXT    NOT NULL,
    fingerprint    TEXT    NOT NULL,
    how            TEXT    NOT NULL,            -- deleted
    at             INTEGER NOT NULL,
    actor          TEXT    NOT NULL,
    job_id         INTEGER NOT NULL DEFAULT 0,
    restore_until  INTEGER NOT NULL,            -- 0: no longer restorable
    restored_at    INTEGER NOT NULL DEFAULT 0,
    restored_by    TEXT    NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX removed_dead_letters_seq ON removed_dead_letters (seq);
CREATE INDEX removed_dead_letters_job ON removed_dead_letters (job_id) WHERE job_id > 0;
CREATE INDEX removed_dead_letters_window ON removed_dead_letters (restore_until) WHERE restore_until > 0;

-- The failed attempts of a message in a group before its last: the error
-- and time of each failed ack that left retries (the last one's error is
-- the dead letter's). Deleted when the message then completes or is
-- dropped; kept with the dead letter's history otherwise.
CREATE TABLE attempts (
    seq         INTEGER NOT NULL,
    group_id    INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,   -- 1: the first try
    at          INTEGER NOT NULL,
    error       TEXT    NOT NULL,
    error_bytes INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (seq, group_id, attempt)
) STRICT;

-- The audit: one row per person's action, a job's linked to it; the
-- broker's own entries (dead letters filed, jobs paused by themselves)
-- are a stream of their own, hidden by default.
ALTER TABLE audit ADD COLUMN job_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE audit ADD COLUMN broker INTEGER NOT NULL DEFAULT 0;
UPDATE audit SET broker = 1 WHERE action = 'dead_letter';
CREATE INDEX audit_stream ON audit (broker, id);

-- Auto-pause of a replay job, per queue: more than replay_pause_percent
-- of the last replay_pause_window settled copies failed again (0: never).
ALTER TABLE queues ADD COLUMN replay_pause_percent INTEGER NOT NULL DEFAULT 20;
ALTER TABLE queues ADD COLUMN replay_pause_window INTEGER NOT NULL DEFAULT 50;
