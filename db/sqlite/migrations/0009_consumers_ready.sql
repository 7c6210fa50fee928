-- A consumer is marked ready when its partition may have messages past
-- its cursor; 0 always means it has none. A pop that names no partition
-- walks the group's ready consumers only: it had walked every consumer of
-- the group, least recently leased first, so that behind ten thousand
-- drained partitions a pop took 5.9 ms instead of 0.18. Pushes and
-- replays set the mark; a pop that finds a marked consumer drained
-- clears it.
ALTER TABLE consumers ADD COLUMN ready INTEGER NOT NULL DEFAULT 1;
UPDATE consumers SET ready = EXISTS (SELECT 1 FROM messages m WHERE m.partition_id = consumers.partition_id AND m.seq > consumers.cursor);
DROP INDEX consumers_ready;
CREATE INDEX consumers_ready ON consumers (queue_id, group_id, leased_at) WHERE ready = 1;
