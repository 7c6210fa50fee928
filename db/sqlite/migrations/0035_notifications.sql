-- Notifications (SPEC section 8, broker/notify.go): channels people set,
-- the rules that send events to them, and the outbox of what is to be
-- sent, written in the transaction of the change that causes it.
--
-- notify_channels: one a channel, by a unique name. kind: slack, webhook
-- or email; url for slack and webhook; the smtp_* columns, from_addr and
-- to_addrs (one address a line) for email. secret: a webhook channel's
-- signing secret, or an email channel's SMTP password: read by the
-- sender only, never shown back. Bounded by broker.MaxChannels.
CREATE TABLE notify_channels (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL UNIQUE,
    kind       TEXT    NOT NULL,
    url        TEXT    NOT NULL DEFAULT '',
    smtp_host  TEXT    NOT NULL DEFAULT '',
    smtp_port  INTEGER NOT NULL DEFAULT 0,
    smtp_user  TEXT    NOT NULL DEFAULT '',
    from_addr  TEXT    NOT NULL DEFAULT '',
    to_addrs   TEXT    NOT NULL DEFAULT '',
    secret     TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,  -- ms
    created_by TEXT    NOT NULL
) STRICT;

-- notify_rules: the events (a comma-separated list of names) of the
-- queues matching queue_pattern (* any run of characters) and of one
-- consumer group (group_name; '' any) go to channel_id. Every event
-- reads them all (events are rare), so they are few: bounded by
-- broker.MaxRules; deleting a channel deletes its rules.
CREATE TABLE notify_rules (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    channel_id    INTEGER NOT NULL,
    events        TEXT    NOT NULL,
    queue_pattern TEXT    NOT NULL,
    group_name    TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,  -- ms
    created_by    TEXT    NOT NULL
) STRICT;

-- notify_outbox: one notification for one channel. state: pending (to
-- send at next_at), sent (at sent_at) or failed (given up NotifyRetryFor
-- after at, last_error says why). A channel's notifications are sent in
-- the order of their ids, one at a time. AUTOINCREMENT: the id is the
-- receiver's idempotency key (webhook-id), never given twice. The
-- maintenance's notifications task deletes the sent and failed rows past
-- their retention (broker.NotifyRetention); a deleted channel's pending
-- rows go with it.
CREATE TABLE notify_outbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    channel_id  INTEGER NOT NULL,
    event       TEXT    NOT NULL,
    queue       TEXT    NOT NULL DEFAULT '',
    group_name  TEXT    NOT NULL DEFAULT '',
    detail      TEXT    NOT NULL DEFAULT '',
    path        TEXT    NOT NULL DEFAULT '',
    at          INTEGER NOT NULL,            -- ms: written
    test        INTEGER NOT NULL DEFAULT 0,  -- 1: a "send a test"
    state       TEXT    NOT NULL DEFAULT 'pending',
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     INTEGER NOT NULL,            -- ms: pending, tried next
    sent_at     INTEGER NOT NULL DEFAULT 0,  -- ms; 0 not sent
    last_error  TEXT    NOT NULL DEFAULT ''
) STRICT;
-- The sender's query: each channel's oldest pending notification.
CREATE INDEX notify_outbox_pending ON notify_outbox (channel_id, id) WHERE state = 'pending';
-- The delivery log of one channel, newest first.
CREATE INDEX notify_outbox_channel ON notify_outbox (channel_id, id);
-- The retention's sweep of what is settled.
CREATE INDEX notify_outbox_settled ON notify_outbox (at) WHERE state <> 'pending';

-- The thresholds' last verdict per queue and consumer group (group_name
-- '' the whole queue), so that a breach and its recovery are each told
-- once, across restarts. detail: the thresholds past, in words. Bounded
-- by the queues and groups; the leader's evaluation deletes the rows of
-- queues that are gone.
CREATE TABLE notify_thresholds (
    queue      TEXT    NOT NULL,
    group_name TEXT    NOT NULL DEFAULT '',
    breached   INTEGER NOT NULL DEFAULT 0,
    detail     TEXT    NOT NULL DEFAULT '',
    changed_at INTEGER NOT NULL,  -- ms
    PRIMARY KEY (queue, group_name)
) STRICT;
