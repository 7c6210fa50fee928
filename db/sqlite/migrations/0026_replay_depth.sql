-- A replay cap per message (issue 19, SPEC.md sections 2 and 4): a
-- message's replays are counted along its dlq: chain. Each copy keeps how
-- many replays it is from the original (depth: 1 for a copy of an
-- original, 2 for a copy of that copy once it was dead-lettered, …), so
-- that a dead letter's count is one lookup by replays' primary key (its
-- seq as copy_seq; none: 0, an original), whatever the history sweep has
-- taken of the older rows of its chain since.
ALTER TABLE replays ADD COLUMN depth INTEGER NOT NULL DEFAULT 1;

-- The copies made before: their depth along the chain that is kept (a
-- row whose message is no copy, or whose copy's row the history sweep
-- took, starts a chain at 1).
WITH RECURSIVE chain(copy_seq, depth) AS (
    SELECT r.copy_seq, 1 FROM replays r WHERE NOT EXISTS (SELECT 1 FROM replays p WHERE p.copy_seq = r.seq)
    UNION ALL
    SELECT r.copy_seq, c.depth + 1 FROM chain c JOIN replays r ON r.seq = c.copy_seq
)
UPDATE replays SET depth = chain.depth FROM chain WHERE chain.copy_seq = replays.copy_seq AND chain.depth > 1;

-- A job's messages (a replay to their own groups: dead letters) at the
-- replay cap: skipped, or, forced, replayed past it (and audited so).
ALTER TABLE jobs ADD COLUMN capped INTEGER NOT NULL DEFAULT 0;
