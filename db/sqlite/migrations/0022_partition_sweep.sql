-- Partitions that are left empty are swept (issue 16; broker/partsweep.go,
-- db/tx_partsweep.go). Retention empties partitions (a producer with a
-- partition per key leaves one a key): the maintenance task `partitions`
-- deletes a partition with no message, no dead letter, no record of a
-- deleted or expired dead letter, no replay lineage naming it and no
-- consumer holding a live lease or a waiting retry, created more than an
-- hour ago; its consumers and settle marks go with it.
--
-- The candidates: partitions whose kept count of messages is 0 (an empty
-- partition's is: whatever removes messages lowers it in its own
-- transaction), from a partial index that holds only those, so that a run
-- reads the empty partitions, not all of them. A fold changes the entry
-- only when a partition's count goes from or to 0.
CREATE INDEX IF NOT EXISTS partitions_empty ON partitions (id) WHERE messages = 0;
-- What keeps an empty partition, one index probe each. Dead letters,
-- their records and replays are written rarely next to messages: an index
-- entry more each. The indexes are partial (partition_id > 0: every dead
-- letter and record, the replays made since 0020) so that only a query
-- that says partition_id > 0 can use them: a plain index on
-- dead_letters.partition_id turned the full-text search into a walk of
-- dead_letters_failed (TestSearchPlans).
CREATE INDEX IF NOT EXISTS dead_letters_partition ON dead_letters (partition_id) WHERE partition_id > 0;
CREATE INDEX IF NOT EXISTS removed_dead_letters_partition ON removed_dead_letters (partition_id) WHERE partition_id > 0;
CREATE INDEX IF NOT EXISTS replays_partition ON replays (partition_id) WHERE partition_id > 0;
