-- Each queue's open and regressed error groups, kept as they change
-- (issue 37, D10): the badge of open groups, /metrics and the overview
-- read a row a queue rather than counting the open groups' entries of
-- error_group_states_open on every page (0.6 ms at 10,000 groups).
--
-- Kept by triggers, so that every write of error_group_states keeps it,
-- whichever statement made it: a group made open, a state or regressed
-- changed, a group deleted with its queue. SQLite only: its one writer
-- makes the row of a queue no point of contention, where on PostgreSQL
-- the processes filing beside each other would queue on it (PostgreSQL
-- counts the partial index, as before).
CREATE TABLE error_group_open_counts (
    queue_id  INTEGER PRIMARY KEY,
    open      INTEGER NOT NULL DEFAULT 0,
    regressed INTEGER NOT NULL DEFAULT 0
);

INSERT INTO error_group_open_counts (queue_id, open, regressed)
    SELECT queue_id, COUNT(*), SUM(regressed) FROM error_group_states WHERE state = 'open' GROUP BY queue_id;

CREATE TRIGGER error_group_open_counts_insert AFTER INSERT ON error_group_states
WHEN NEW.state = 'open'
BEGIN
    INSERT INTO error_group_open_counts (queue_id, open, regressed) VALUES (NEW.queue_id, 1, NEW.regressed)
        ON CONFLICT (queue_id) DO UPDATE SET open = open + 1, regressed = regressed + excluded.regressed;
END;

CREATE TRIGGER error_group_open_counts_delete AFTER DELETE ON error_group_states
WHEN OLD.state = 'open'
BEGIN
    UPDATE error_group_open_counts SET open = open - 1, regressed = regressed - OLD.regressed WHERE queue_id = OLD.queue_id;
END;

CREATE TRIGGER error_group_open_counts_update AFTER UPDATE OF state, regressed, queue_id ON error_group_states
WHEN (OLD.state = 'open' OR NEW.state = 'open')
    AND (OLD.state IS NOT NEW.state OR OLD.regressed IS NOT NEW.regressed OR OLD.queue_id IS NOT NEW.queue_id)
BEGIN
    UPDATE error_group_open_counts SET open = open - 1, regressed = regressed - OLD.regressed
        WHERE queue_id = OLD.queue_id AND OLD.state = 'open';
    INSERT INTO error_group_open_counts (queue_id, open, regressed)
        SELECT NEW.queue_id, 1, NEW.regressed WHERE NEW.state = 'open'
        ON CONFLICT (queue_id) DO UPDATE SET open = open + 1, regressed = regressed + excluded.regressed;
END;
