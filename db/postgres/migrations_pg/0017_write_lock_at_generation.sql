-- lazarus_write_lock_at(key, shared, seen) is lazarus_write_lock (0002)
-- or lazarus_write_lock_shared (0004) for a write whose statements are
-- sent with its BEGIN before the generation is known (db/postgres/begin.go):
-- once the lock is held it reads the generation, and when it is not
-- seen (another process changed what this process's cache holds) it
-- fails with SQLSTATE LZ001. The statements sent after it in the same
-- round trip then do not run (the transaction is aborted), COMMIT
-- included: a push sent with its BEGIN and COMMIT in one round trip
-- never inserts into a partition its cache has wrong. The process runs
-- the write again with its BEGIN sent first and its cache emptied.
CREATE FUNCTION lazarus_write_lock_at(k BIGINT, shared BOOLEAN, seen BIGINT) RETURNS BIGINT LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    g BIGINT;
BEGIN
    IF shared THEN
        PERFORM pg_advisory_xact_lock_shared(k);
    ELSE
        PERFORM pg_advisory_xact_lock(k);
    END IF;
    g := (SELECT gen FROM cache_generation WHERE id = 1);
    IF g <> seen THEN
        RAISE EXCEPTION 'the cache generation moved: % is not %', g, seen USING ERRCODE = 'LZ001';
    END IF;
    RETURN g;
END;
$$;
