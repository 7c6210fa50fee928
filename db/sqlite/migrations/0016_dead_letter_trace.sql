-- A dead letter carries its message's traceId (immutable, like the
-- message), so that the header search finds the dead letters of a trace
-- with an index search (issue 14). Messages get no index on trace_id:
-- every push would pay for it (a partial index on trace_id made pushes
-- with a traceId 15-25 % slower one at a time and about 2x slower 100 at
-- a time; BenchmarkPushWithSearchIndex), and the dead letters are what
-- support looks for. Only dead letters with a traceId are in the index.
ALTER TABLE dead_letters ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
UPDATE dead_letters SET trace_id = (SELECT m.trace_id FROM messages m WHERE m.seq = dead_letters.seq)
    WHERE COALESCE((SELECT m.trace_id FROM messages m WHERE m.seq = dead_letters.seq), '') <> '';
CREATE INDEX dead_letters_trace ON dead_letters (trace_id) WHERE trace_id <> '';
