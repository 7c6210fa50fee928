-- Dead letters per queue, group and first line of their error, kept with
-- the dead letters: the list's top errors of a queue or group without a
-- scan (broker.ErrorLine is the first line, cut to 500 bytes).
CREATE TABLE error_counts (
    queue_id INTEGER NOT NULL,
    group_id INTEGER NOT NULL,
    line     TEXT    NOT NULL,
    count    INTEGER NOT NULL,
    PRIMARY KEY (queue_id, group_id, line)
) STRICT, WITHOUT ROWID;
CREATE INDEX error_counts_top ON error_counts (queue_id, group_id, count DESC);

INSERT INTO error_counts (queue_id, group_id, line, count)
SELECT queue_id, group_id, substr(substr(error, 1, instr(error || char(10), char(10)) - 1), 1, 500) AS line, COUNT(*)
FROM dead_letters GROUP BY queue_id, group_id, line;
