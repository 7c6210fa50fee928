-- The cache generation: every process keeps the queues, partitions, groups
-- and subscriptions its hot paths look up in memory (broker's cache), and
-- empties that cache when its own writes change or remove one. Several
-- processes on one database must also see the others' changes: each
-- statement that updates or deletes rows of those tables (or truncates
-- them) moves the generation, in its own transaction, and a write
-- transaction reads it as it takes the writer's lock (db's pgWrite); a
-- process that sees it moved since its previous write empties its cache
-- before anything is looked up (broker.TxScope.SetForeign). Inserts do not
-- move it: nothing a process holds is made stale by a new row.
CREATE TABLE cache_generation (
    id  BIGINT PRIMARY KEY CHECK (id = 1),
    gen BIGINT NOT NULL
);
INSERT INTO cache_generation (id, gen) VALUES (1, 1);

-- A statement that changed or removed rows moves it (one that found none
-- does not: the rows it saw go through a transition table); a TRUNCATE
-- always does.
CREATE FUNCTION lazarus_cache_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed) THEN
        UPDATE cache_generation SET gen = gen + 1 WHERE id = 1;
    END IF;
    RETURN NULL;
END;
$$;

CREATE FUNCTION lazarus_cache_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE cache_generation SET gen = gen + 1 WHERE id = 1;
    RETURN NULL;
END;
$$;

-- The partitions' kept counts (messages, counted_seq) change at every
-- fold and are not cached: an update moves the generation only when a
-- cached column changed.
CREATE FUNCTION lazarus_partitions_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed o JOIN partitions p ON p.id = o.id
               WHERE (p.queue_id, p.name, p.uuid) IS DISTINCT FROM (o.queue_id, o.name, o.uuid)) THEN
        UPDATE cache_generation SET gen = gen + 1 WHERE id = 1;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER queues_cache_update AFTER UPDATE ON queues REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_moved();
CREATE TRIGGER queues_cache_delete AFTER DELETE ON queues REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_moved();
CREATE TRIGGER partitions_cache_update AFTER UPDATE ON partitions REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_partitions_moved();
CREATE TRIGGER partitions_cache_delete AFTER DELETE ON partitions REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_moved();
CREATE TRIGGER groups_cache_update AFTER UPDATE ON groups REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_moved();
CREATE TRIGGER groups_cache_delete AFTER DELETE ON groups REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_moved();
CREATE TRIGGER subscriptions_cache_update AFTER UPDATE ON subscriptions REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_moved();
CREATE TRIGGER subscriptions_cache_delete AFTER DELETE ON subscriptions REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_moved();
CREATE TRIGGER queues_cache_truncate AFTER TRUNCATE ON queues
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_truncated();
CREATE TRIGGER partitions_cache_truncate AFTER TRUNCATE ON partitions
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_truncated();
CREATE TRIGGER groups_cache_truncate AFTER TRUNCATE ON groups
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_truncated();
CREATE TRIGGER subscriptions_cache_truncate AFTER TRUNCATE ON subscriptions
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_truncated();

-- lazarus_write_lock(key) takes the writer's lock (a transaction's
-- advisory lock) and then reads the generation: in a statement of its
-- own, whose snapshot is taken once the lock is held, so that it sees
-- the commit of the writer it waited for.
CREATE FUNCTION lazarus_write_lock(k BIGINT) RETURNS BIGINT LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(k);
    RETURN (SELECT gen FROM cache_generation WHERE id = 1);
END;
$$;
