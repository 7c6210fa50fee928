-- Each error group's funnel per day (unix time / 86400), the sums of its
-- hours in error_group_hours (issue 37, D10): a list's 7 d funnels
-- summed up to 168 hourly rows a group, 16,800 for a list of 100. With
-- the days, a week is its days from the day boundary nearest its start
-- (at most 8 rows) and the hours between that boundary and the start,
-- added or taken away (at most 12): with the 24 hours of the day's
-- funnel, at most 44 rows a group.
--
-- Kept by triggers, so that a day is always the sum of the hours there
-- are of it, whichever statement wrote them (a filing, a funnel's count,
-- the sweep, a queue's deletion): a day's row is there while any hour of
-- it is. SQLite only, like error_group_open_counts (0041): PostgreSQL
-- sums the hours, as before.
CREATE TABLE error_group_days (
    queue_id     INTEGER NOT NULL,
    group_id     INTEGER NOT NULL,
    fingerprint  TEXT    NOT NULL,
    day          INTEGER NOT NULL,
    filed        INTEGER NOT NULL,
    replayed     INTEGER NOT NULL,
    succeeded    INTEGER NOT NULL,
    failed_again INTEGER NOT NULL,
    deleted      INTEGER NOT NULL,
    expired      INTEGER NOT NULL,
    PRIMARY KEY (queue_id, group_id, fingerprint, day)
) STRICT, WITHOUT ROWID;

INSERT INTO error_group_days (queue_id, group_id, fingerprint, day, filed, replayed, succeeded, failed_again, deleted, expired)
    SELECT queue_id, group_id, fingerprint, hour / 24, SUM(filed), SUM(replayed), SUM(succeeded), SUM(failed_again), SUM(deleted), SUM(expired)
    FROM error_group_hours GROUP BY queue_id, group_id, fingerprint, hour / 24;

CREATE TRIGGER error_group_days_insert AFTER INSERT ON error_group_hours
BEGIN
    INSERT INTO error_group_days (queue_id, group_id, fingerprint, day, filed, replayed, succeeded, failed_again, deleted, expired)
        VALUES (NEW.queue_id, NEW.group_id, NEW.fingerprint, NEW.hour / 24, NEW.filed, NEW.replayed, NEW.succeeded, NEW.failed_again, NEW.deleted, NEW.expired)
        ON CONFLICT (queue_id, group_id, fingerprint, day) DO UPDATE SET
            filed = filed + excluded.filed, replayed = replayed + excluded.replayed, succeeded = succeeded + excluded.succeeded,
            failed_again = failed_again + excluded.failed_again, deleted = deleted + excluded.deleted, expired = expired + excluded.expired;
END;

-- An hour's counts changed (its key stays: every write of an hour is an
-- upsert by its key): its day's row, there since the hour's insert,
-- changes by as much.
CREATE TRIGGER error_group_days_update AFTER UPDATE ON error_group_hours
WHEN OLD.queue_id = NEW.queue_id AND OLD.group_id = NEW.group_id AND OLD.fingerprint = NEW.fingerprint AND OLD.hour / 24 = NEW.hour / 24
BEGIN
    UPDATE error_group_days SET filed = filed + NEW.filed - OLD.filed, replayed = replayed + NEW.replayed - OLD.replayed,
            succeeded = succeeded + NEW.succeeded - OLD.succeeded, failed_again = failed_again + NEW.failed_again - OLD.failed_again,
            deleted = deleted + NEW.deleted - OLD.deleted, expired = expired + NEW.expired - OLD.expired
        WHERE queue_id = NEW.queue_id AND group_id = NEW.group_id AND fingerprint = NEW.fingerprint AND day = NEW.hour / 24;
END;

-- An hour moved to another group or day (no statement does; kept exact
-- all the same): out of its old day, into its new one.
CREATE TRIGGER error_group_days_move AFTER UPDATE ON error_group_hours
WHEN NOT (OLD.queue_id = NEW.queue_id AND OLD.group_id = NEW.group_id AND OLD.fingerprint = NEW.fingerprint AND OLD.hour / 24 = NEW.hour / 24)
BEGIN
    UPDATE error_group_days SET filed = filed - OLD.filed, replayed = replayed - OLD.replayed, succeeded = succeeded - OLD.succeeded,
            failed_again = failed_again - OLD.failed_again, deleted = deleted - OLD.deleted, expired = expired - OLD.expired
        WHERE queue_id = OLD.queue_id AND group_id = OLD.group_id AND fingerprint = OLD.fingerprint AND day = OLD.hour / 24;
    DELETE FROM error_group_days
        WHERE queue_id = OLD.queue_id AND group_id = OLD.group_id AND fingerprint = OLD.fingerprint AND day = OLD.hour / 24
        AND NOT EXISTS (SELECT 1 FROM error_group_hours h WHERE h.queue_id = OLD.queue_id AND h.group_id = OLD.group_id
            AND h.fingerprint = OLD.fingerprint AND h.hour BETWEEN OLD.hour / 24 * 24 AND OLD.hour / 24 * 24 + 23);
    INSERT INTO error_group_days (queue_id, group_id, fingerprint, day, filed, replayed, succeeded, failed_again, deleted, expired)
        VALUES (NEW.queue_id, NEW.group_id, NEW.fingerprint, NEW.hour / 24, NEW.filed, NEW.replayed, NEW.succeeded, NEW.failed_again, NEW.deleted, NEW.expired)
        ON CONFLICT (queue_id, group_id, fingerprint, day) DO UPDATE SET
            filed = filed + excluded.filed, replayed = replayed + excluded.replayed, succeeded = succeeded + excluded.succeeded,
            failed_again = failed_again + excluded.failed_again, deleted = deleted + excluded.deleted, expired = expired + excluded.expired;
END;

-- An hour deleted (the sweep past ErrorGroupHourRetention, a queue's
-- deletion): out of its day, whose row goes with its last hour.
CREATE TRIGGER error_group_days_delete AFTER DELETE ON error_group_hours
BEGIN
    UPDATE error_group_days SET filed = filed - OLD.filed, replayed = replayed - OLD.replayed, succeeded = succeeded - OLD.succeeded,
            failed_again = failed_again - OLD.failed_again, deleted = deleted - OLD.deleted, expired = expired - OLD.expired
        WHERE queue_id = OLD.queue_id AND group_id = OLD.group_id AND fingerprint = OLD.fingerprint AND day = OLD.hour / 24;
    DELETE FROM error_group_days
        WHERE queue_id = OLD.queue_id AND group_id = OLD.group_id AND fingerprint = OLD.fingerprint AND day = OLD.hour / 24
        AND NOT EXISTS (SELECT 1 FROM error_group_hours h WHERE h.queue_id = OLD.queue_id AND h.group_id = OLD.group_id
            AND h.fingerprint = OLD.fingerprint AND h.hour BETWEEN OLD.hour / 24 * 24 AND OLD.hour / 24 * 24 + 23);
END;
