-- lazarus_write_lock_shared(key) is lazarus_write_lock (0002) for a
-- write that may run beside others (broker.Concurrent: a push, a pop's
-- lease, an ack): it takes the writer's lock shared, so that such writes
-- of several processes run at once and settle their conflicts by row
-- locks, while a write that takes the lock exclusively runs alone. The
-- generation is read once the lock is held, as there.
CREATE FUNCTION lazarus_write_lock_shared(k BIGINT) RETURNS BIGINT LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(k);
    RETURN (SELECT gen FROM cache_generation WHERE id = 1);
END;
$$;
