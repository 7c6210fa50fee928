-- Time-bucketed counters per queue and group, written in the same
-- transactions as the events they count, for the charts and /metrics.
-- Each bucket also keeps the depth and the oldest dead letter at its end,
-- so no chart scans dead letters. Minute buckets roll up into hour buckets
-- after 48 h; hour buckets go after 90 days (broker/stats.go).

ALTER TABLE group_stats ADD COLUMN replay_completed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE group_stats ADD COLUMN replay_failed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE group_stats ADD COLUMN oldest_at INTEGER NOT NULL DEFAULT 0;
UPDATE group_stats SET oldest_at = COALESCE((SELECT MIN(d.failed_at) FROM dead_letters d
    WHERE d.queue_id = group_stats.queue_id AND d.group_id = group_stats.group_id), 0);

CREATE TABLE stats_minute (
    queue_id         INTEGER NOT NULL,
    group_id         INTEGER NOT NULL,
    minute           INTEGER NOT NULL, -- Unix minutes
    dead_lettered    INTEGER NOT NULL DEFAULT 0,
    replayed         INTEGER NOT NULL DEFAULT 0,
    deleted          INTEGER NOT NULL DEFAULT 0,
    dropped          INTEGER NOT NULL DEFAULT 0,
    completed        INTEGER NOT NULL DEFAULT 0,
    failed           INTEGER NOT NULL DEFAULT 0,
    replay_completed INTEGER NOT NULL DEFAULT 0,
    replay_failed    INTEGER NOT NULL DEFAULT 0,
    depth            INTEGER NOT NULL DEFAULT 0, -- at the end of the minute
    oldest_at        INTEGER NOT NULL DEFAULT 0, -- at the end of the minute
    PRIMARY KEY (queue_id, group_id, minute)
) STRICT, WITHOUT ROWID;
-- charts over every queue read a time range
CREATE INDEX stats_minute_time ON stats_minute (minute);

CREATE TABLE stats_hour (
    queue_id         INTEGER NOT NULL,
    group_id         INTEGER NOT NULL,
    hour             INTEGER NOT NULL, -- Unix hours
    dead_lettered    INTEGER NOT NULL DEFAULT 0,
    replayed         INTEGER NOT NULL DEFAULT 0,
    deleted          INTEGER NOT NULL DEFAULT 0,
    dropped          INTEGER NOT NULL DEFAULT 0,
    completed        INTEGER NOT NULL DEFAULT 0,
    failed           INTEGER NOT NULL DEFAULT 0,
    replay_completed INTEGER NOT NULL DEFAULT 0,
    replay_failed    INTEGER NOT NULL DEFAULT 0,
    depth            INTEGER NOT NULL DEFAULT 0,
    oldest_at        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, group_id, hour)
) STRICT, WITHOUT ROWID;
CREATE INDEX stats_hour_time ON stats_hour (hour);
