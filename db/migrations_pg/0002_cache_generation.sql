-- The cache generation: every process keeps the queues, partitions, groups
-- and subscriptions its hot paths look up in memory (broker's cache), and
-- empties that cache when its own writes change or remove one. Several
-- processes on one database must also see the others' changes: each
-- statement that updates or deletes rows of those tables (or truncates
-- them) moves the generation, in its own transaction, and a write
-- transaction reads it as it takes the writer's lock (db's pgWrite); a
-- process that sees it moved since its previous write empties its cache
-- before anything is looked up (broker.TxScope.SetForeign). Inserts do not
-- move it: nothing a process holds is made stale by a new row. The
-- partitions' kept counts (messages, counted_seq) are not cached, so
-- updates of them alone do not move it.
CREATE TABLE cache_generation (
    id  BIGINT PRIMARY KEY CHECK (id = 1),
    gen BIGINT NOT NULL
);
INSERT INTO cache_generation (id, gen) VALUES (1, 1);

CREATE FUNCTION lazarus_cache_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE cache_generation SET gen = gen + 1 WHERE id = 1;
    RETURN NULL;
END;
$$;

CREATE TRIGGER queues_cache AFTER UPDATE OR DELETE OR TRUNCATE ON queues
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_moved();
CREATE TRIGGER partitions_cache AFTER UPDATE OF queue_id, name, uuid OR DELETE OR TRUNCATE ON partitions
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_moved();
CREATE TRIGGER groups_cache AFTER UPDATE OR DELETE OR TRUNCATE ON groups
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_moved();
CREATE TRIGGER subscriptions_cache AFTER UPDATE OF queue_id, group_id OR DELETE OR TRUNCATE ON subscriptions
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_moved();
