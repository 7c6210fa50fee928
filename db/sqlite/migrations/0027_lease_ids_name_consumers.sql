-- Lease ids name their consumer (broker.NewLeaseID: a UUID of version 8
-- holding the group's and the partition's ids), so acks, extends and
-- transactions find a lease by the consumers' primary key. The unique
-- index of every lease id, written at each pop and each ack (two pages of
-- the log, a fifth of a pop+ack's), keeps only the lease ids made before
-- this migration (version 7: the 15th character is not '8'), for the
-- leases live while it ran; it stays empty once they end.
DROP INDEX consumers_lease;
CREATE UNIQUE INDEX consumers_lease_v7 ON consumers (lease_id)
    WHERE lease_id IS NOT NULL AND substr(lease_id, 15, 1) <> '8';
