-- How many messages each partition holds: `messages` counts those up to
-- seq `counted_seq`, and a read adds those pushed since. The writer brings
-- both up to date at most once a second, inside a commit, so a push costs
-- no statement more. The queue page and the queue API had counted every
-- message of every partition on each look, which grew with every message
-- ever pushed (53 ms a look at 1.25M; messages are kept).
ALTER TABLE partitions ADD COLUMN messages INTEGER NOT NULL DEFAULT 0;
ALTER TABLE partitions ADD COLUMN counted_seq INTEGER NOT NULL DEFAULT 0;
UPDATE partitions SET
    messages = (SELECT COUNT(*) FROM messages m WHERE m.partition_id = partitions.id),
    counted_seq = COALESCE((SELECT MAX(m.seq) FROM messages m WHERE m.partition_id = partitions.id), 0);
