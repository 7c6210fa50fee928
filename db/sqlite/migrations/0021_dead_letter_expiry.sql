-- Dead letters that expire (deadLetterRetentionSeconds, issue 16): an
-- expired dead letter leaves a record in removed_dead_letters (how =
-- 'expired', never restorable) that keeps the retention that expired it,
-- in seconds, so that its page can say by which rule it went. 0 on the
-- records of deletes.
ALTER TABLE removed_dead_letters ADD COLUMN retention INTEGER NOT NULL DEFAULT 0;
