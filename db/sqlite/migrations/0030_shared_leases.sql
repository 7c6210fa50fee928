-- A pop of several partitions (Queen's partitions=N) puts them all under
-- one lease id, which each of their consumers holds (broker.NewSharedLeaseID:
-- a version 8 id whose partition bits are zero; it names the group only).
-- An ack without partitionId, an extend or a transaction finds those
-- consumers by this index. It holds shared lease ids only: a pop of one
-- partition (its lease id names the partition: migration 0027) writes
-- nothing to it.
CREATE INDEX consumers_lease_shared ON consumers (lease_id)
    WHERE substr(lease_id, 15, 1) = '8' AND substr(lease_id, 27, 1) IN ('0', '4', '8', 'c') AND substr(lease_id, 28, 9) = '000000000';
