-- Quarter-hour buckets, and hour buckets written live (no longer only
-- rolled up from minutes): each chart range reads one table at or near its
-- step (1 h by minute, 24 h by quarter hour, 7 d and 30 d by hour), a
-- bounded number of rows per group and no aggregate over a whole table.
-- Minute buckets go after 48 h, quarters after 8 days, hours after 90 days
-- (broker/stats.go).

CREATE TABLE stats_quarter (
    queue_id         INTEGER NOT NULL,
    group_id         INTEGER NOT NULL,
    quarter          INTEGER NOT NULL, -- Unix minutes / 15
    dead_lettered    INTEGER NOT NULL DEFAULT 0,
    replayed         INTEGER NOT NULL DEFAULT 0,
    deleted          INTEGER NOT NULL DEFAULT 0,
    dropped          INTEGER NOT NULL DEFAULT 0,
    completed        INTEGER NOT NULL DEFAULT 0,
    failed           INTEGER NOT NULL DEFAULT 0,
    replay_completed INTEGER NOT NULL DEFAULT 0,
    replay_failed    INTEGER NOT NULL DEFAULT 0,
    depth            INTEGER NOT NULL DEFAULT 0, -- at the end of the quarter
    oldest_at        INTEGER NOT NULL DEFAULT 0, -- at the end of the quarter
    PRIMARY KEY (queue_id, group_id, quarter)
) STRICT, WITHOUT ROWID;
CREATE INDEX stats_quarter_time ON stats_quarter (quarter);

-- The minutes not rolled up yet, into quarters and hours (depth and
-- oldest_at from each one's last minute: the row of MAX(minute)).
INSERT INTO stats_quarter (queue_id, group_id, quarter, dead_lettered, replayed, deleted, dropped, completed, failed, replay_completed, replay_failed, depth, oldest_at)
SELECT queue_id, group_id, q, dl, rp, de, dr, co, fa, rc, rf, depth, oldest_at FROM (
    SELECT queue_id, group_id, minute / 15 AS q, SUM(dead_lettered) AS dl, SUM(replayed) AS rp, SUM(deleted) AS de, SUM(dropped) AS dr,
        SUM(completed) AS co, SUM(failed) AS fa, SUM(replay_completed) AS rc, SUM(replay_failed) AS rf, MAX(minute) AS last, depth, oldest_at
    FROM stats_minute GROUP BY queue_id, group_id, minute / 15);

INSERT INTO stats_hour (queue_id, group_id, hour, dead_lettered, replayed, deleted, dropped, completed, failed, replay_completed, replay_failed, depth, oldest_at)
SELECT queue_id, group_id, h, dl, rp, de, dr, co, fa, rc, rf, depth, oldest_at FROM (
    SELECT queue_id, group_id, minute / 60 AS h, SUM(dead_lettered) AS dl, SUM(replayed) AS rp, SUM(deleted) AS de, SUM(dropped) AS dr,
        SUM(completed) AS co, SUM(failed) AS fa, SUM(replay_completed) AS rc, SUM(replay_failed) AS rf, MAX(minute) AS last, depth, oldest_at
    FROM stats_minute GROUP BY queue_id, group_id, minute / 60)
WHERE true
ON CONFLICT (queue_id, group_id, hour) DO UPDATE SET dead_lettered = dead_lettered + excluded.dead_lettered,
    replayed = replayed + excluded.replayed, deleted = deleted + excluded.deleted, dropped = dropped + excluded.dropped,
    completed = completed + excluded.completed, failed = failed + excluded.failed,
    replay_completed = replay_completed + excluded.replay_completed, replay_failed = replay_failed + excluded.replay_failed,
    depth = excluded.depth, oldest_at = excluded.oldest_at;
