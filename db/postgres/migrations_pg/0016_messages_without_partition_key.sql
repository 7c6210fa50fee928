-- The messages' foreign key to their partition goes (issue 37, P1 and
-- P5 in docs/performance.md). It checked every message a push inserted
-- with a query of its own (a row lock on the partition included): 60,066
-- checks for P5's 60,000 messages; without them PostgreSQL's backends
-- took 4-7 µs less CPU a message in P1 (runs alternated with the key).
--
-- What it kept out, a message in a partition another process removed,
-- the writer's lock and the cache generation keep out already (0002,
-- 0004): a partition is removed only by a write that holds the writer's
-- lock exclusively (the sweep of empty partitions, a queue's deletion),
-- and its removal moves the generation in the same transaction; a push
-- holds that lock (shared, beside other processes) and reads the
-- generation once it holds it, so a push after the removal finds its
-- cache stale, empties it and makes the partition anew
-- (TestAWriteThatWaitedSeesWhatTheOtherProcessRemoved). A queue's
-- deletion removes its messages by statement, as on SQLite, whose
-- schema never had the key; the cascade removed nothing else.
DO $$
DECLARE
    c TEXT;
BEGIN
    FOR c IN
        SELECT conname FROM pg_constraint
        WHERE conrelid = 'messages'::regclass AND confrelid = 'partitions'::regclass AND contype = 'f'
    LOOP
        EXECUTE format('ALTER TABLE messages DROP CONSTRAINT %I', c);
    END LOOP;
END
$$;
