-- Traces a worker records on a message it handles (Queen's
-- message.trace(): POST /api/v1/traces, broker/trace.go), shown in the
-- history of the message's dead letters. A row is one trace of message
-- seq (of queue queue_id) by consumer group group_name: its event type,
-- its trace names (a JSON array), its data as JSON text, cut at
-- broker.MaxTraceData bytes (data_bytes is then the size sent, else 0),
-- and dropped: how many traces of the message came after this one, the
-- last kept (broker.MaxTracesPerMessage), and were not kept. Bounded per
-- message; a trace goes when its message and the message's dead letters
-- (live or restorable) are all gone (the history maintenance task), or
-- with its queue.
CREATE TABLE message_traces (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    seq        INTEGER NOT NULL,
    queue_id   INTEGER NOT NULL,
    group_name TEXT    NOT NULL,
    event_type TEXT    NOT NULL,
    names      TEXT    NOT NULL,
    data       TEXT    NOT NULL,
    data_bytes INTEGER NOT NULL,
    dropped    INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX message_traces_seq ON message_traces (seq, id);
CREATE INDEX message_traces_queue ON message_traces (queue_id);
