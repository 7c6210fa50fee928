-- The index of shared lease ids (a pop of several partitions under one
-- lease): SQLite's migration 0030 says why, and why a pop of one
-- partition writes nothing to it.
CREATE INDEX consumers_lease_shared ON consumers (lease_id)
    WHERE substr(lease_id, 15, 1) = '8' AND substr(lease_id, 27, 1) IN ('0', '4', '8', 'c') AND substr(lease_id, 28, 9) = '000000000';
