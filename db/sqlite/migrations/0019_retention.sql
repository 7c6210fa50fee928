-- Retention (SPEC.md section 2, issue 16): three queue options that were
-- kept without being enforced become columns, and the counts of what
-- retention removes, kept as it removes them (never silent).
--
-- completed_retention: seconds a message every group has settled is kept
--   after its last settlement (0 keeps); the default, 7 days, applies to
--   queues that never set it.
-- retention: seconds any message is kept, settled or not (0: off).
-- dead_letter_retention: seconds a dead letter is kept (0: until
--   replayed or deleted).
ALTER TABLE queues ADD COLUMN completed_retention INTEGER NOT NULL DEFAULT 604800;
ALTER TABLE queues ADD COLUMN retention INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN dead_letter_retention INTEGER NOT NULL DEFAULT 0;

-- A value given before, kept as "not enforced", is the value enforced now.
UPDATE queues SET completed_retention = json_extract(kept_options, '$.completedRetentionSeconds')
    WHERE json_type(kept_options, '$.completedRetentionSeconds') = 'integer';
UPDATE queues SET retention = json_extract(kept_options, '$.retentionSeconds')
    WHERE json_type(kept_options, '$.retentionSeconds') = 'integer';
UPDATE queues SET dead_letter_retention = json_extract(kept_options, '$.deadLetterRetentionSeconds')
    WHERE json_type(kept_options, '$.deadLetterRetentionSeconds') = 'integer';
UPDATE queues SET kept_options = json_remove(kept_options, '$.completedRetentionSeconds', '$.retentionSeconds', '$.deadLetterRetentionSeconds')
    WHERE json_type(kept_options, '$.completedRetentionSeconds') IS NOT NULL
       OR json_type(kept_options, '$.retentionSeconds') IS NOT NULL
       OR json_type(kept_options, '$.deadLetterRetentionSeconds') IS NOT NULL;

-- expired: messages retentionSeconds deleted before this group had
--   settled them ("expired unread").
-- dead_letters_expired: dead letters deadLetterRetentionSeconds expired.
ALTER TABLE group_stats ADD COLUMN expired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE group_stats ADD COLUMN dead_letters_expired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN expired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_minute ADD COLUMN dead_letters_expired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_quarter ADD COLUMN expired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_quarter ADD COLUMN dead_letters_expired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN expired INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stats_hour ADD COLUMN dead_letters_expired INTEGER NOT NULL DEFAULT 0;
