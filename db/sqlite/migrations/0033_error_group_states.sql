-- Error groups you own (SPEC section 7): each error group (a fingerprint
-- in a queue and consumer group) gets a state, an owner, a note, a link,
-- a history of its state changes, and its funnel: what became of its
-- dead letters over its whole life (here) and per hour (error_group_hours,
-- for the last 24 hours and 7 days).
--
-- error_groups (0014) keeps the dead letters a group holds now, and its
-- row goes when they are gone; a group's state and funnel must outlive
-- them (a resolved group whose dead letters were all replayed is the one
-- whose proof matters), so they live in a table of their own, whose row
-- is made by the group's first filing and kept. It is bounded by the
-- fingerprints ever filed per queue and consumer group (fingerprints mask
-- ids, numbers and quoted values: a few per kind of failure); a queue's
-- or consumer group's removal takes its rows with it.
--
-- state: open, acknowledged, resolved or ignored. regressed: 1 when the
-- group opened again by itself after it was resolved (cleared by a
-- person's change). until_at (ms) and until_filed (a whole-life filed
-- count) end an ignore; 0: none. changed_at/changed_by: the last change
-- of state (0/'': never). The six counts are the whole-life funnel kept
-- as the broker works; since_* are those counts when the state last
-- changed: the difference is what happened in the current state, the
-- evidence of a resolve. first/last_filed_at span the group's filings.
CREATE TABLE error_group_states (
    id                 INTEGER PRIMARY KEY,
    queue_id           INTEGER NOT NULL,
    group_id           INTEGER NOT NULL,
    fingerprint        TEXT    NOT NULL,
    state              TEXT    NOT NULL DEFAULT 'open',
    regressed          INTEGER NOT NULL DEFAULT 0,
    owner              TEXT    NOT NULL DEFAULT '',
    note               TEXT    NOT NULL DEFAULT '',
    link               TEXT    NOT NULL DEFAULT '',
    version            TEXT    NOT NULL DEFAULT '',
    until_at           INTEGER NOT NULL DEFAULT 0,
    until_filed        INTEGER NOT NULL DEFAULT 0,
    changed_at         INTEGER NOT NULL DEFAULT 0,
    changed_by         TEXT    NOT NULL DEFAULT '',
    filed              INTEGER NOT NULL DEFAULT 0,
    replayed           INTEGER NOT NULL DEFAULT 0,
    succeeded          INTEGER NOT NULL DEFAULT 0,
    failed_again       INTEGER NOT NULL DEFAULT 0,
    deleted            INTEGER NOT NULL DEFAULT 0,
    expired            INTEGER NOT NULL DEFAULT 0,
    since_replayed     INTEGER NOT NULL DEFAULT 0,
    since_succeeded    INTEGER NOT NULL DEFAULT 0,
    since_failed_again INTEGER NOT NULL DEFAULT 0,
    first_filed_at     INTEGER NOT NULL,
    last_filed_at      INTEGER NOT NULL,
    UNIQUE (queue_id, group_id, fingerprint)
) STRICT;
-- A queue's fingerprint in whichever consumer groups have it (the
-- dead-letter list's panel, a dead letter's banner).
CREATE INDEX error_group_states_fingerprint ON error_group_states (queue_id, fingerprint);
-- The ignores that end at a time (the maintenance's sweep opens them).
CREATE INDEX error_group_states_until ON error_group_states (until_at) WHERE state = 'ignored' AND until_at > 0;

-- The history of each group's state changes, newest first by id; swept
-- with the audit entries (the audit retention), which record them too.
CREATE TABLE error_group_history (
    id         INTEGER PRIMARY KEY,
    state_id   INTEGER NOT NULL,
    at         INTEGER NOT NULL,
    actor      TEXT    NOT NULL,
    from_state TEXT    NOT NULL,
    to_state   TEXT    NOT NULL,
    why        TEXT    NOT NULL
) STRICT;
CREATE INDEX error_group_history_group ON error_group_history (state_id, id);
CREATE INDEX error_group_history_at ON error_group_history (at);

-- The funnel per hour, beside the filings the hours kept already: the
-- last 24 hours and 7 days are sums of at most 168 rows a group. The
-- stats task now keeps these hours for 8 days (ErrorGroupHourRetention).
ALTER TABLE error_group_hours ADD COLUMN replayed     INTEGER NOT NULL DEFAULT 0;
ALTER TABLE error_group_hours ADD COLUMN succeeded    INTEGER NOT NULL DEFAULT 0;
ALTER TABLE error_group_hours ADD COLUMN failed_again INTEGER NOT NULL DEFAULT 0;
ALTER TABLE error_group_hours ADD COLUMN deleted      INTEGER NOT NULL DEFAULT 0;
ALTER TABLE error_group_hours ADD COLUMN expired      INTEGER NOT NULL DEFAULT 0;

-- Which error group a replayed copy's outcome counts in (its funnel's
-- succeeded or failed again): error_group_states.id; 0 for the copies
-- replayed before this migration, which count in no funnel.
ALTER TABLE replay_outcomes ADD COLUMN error_group INTEGER NOT NULL DEFAULT 0;

-- The groups there are: their funnel starts from the dead letters they
-- hold (what was filed, replayed or deleted before is not known).
INSERT INTO error_group_states (queue_id, group_id, fingerprint, filed, first_filed_at, last_filed_at)
SELECT queue_id, group_id, fingerprint, dead_letters, first_failed_at, last_failed_at FROM error_groups;
