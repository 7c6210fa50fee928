-- Seed 2's remaining advice (SPEC.md section 2, issue 19): four queue
-- options that were kept without being enforced become columns.
--
-- retry_backoff: the factor of exponential backoff; the wait before retry
--   k is retry_delay × retry_backoff^(k-1), at most retry_delay_max (ms).
--   1: the fixed delay of before.
-- max_replays: a dead letter whose message was replayed this many times
--   already (its dlq: chain) is not replayed again unless forced; 0: no cap.
-- dead_letter_archive: with dead_letter_retention, dead letters are
--   written to the archive before they expire.
ALTER TABLE queues ADD COLUMN retry_backoff REAL NOT NULL DEFAULT 1;
ALTER TABLE queues ADD COLUMN retry_delay_max INTEGER NOT NULL DEFAULT 300000;
ALTER TABLE queues ADD COLUMN max_replays INTEGER NOT NULL DEFAULT 5;
ALTER TABLE queues ADD COLUMN dead_letter_archive INTEGER NOT NULL DEFAULT 0;

-- A value given before, kept as "not enforced", is the value enforced now.
UPDATE queues SET retry_backoff = json_extract(kept_options, '$.retryBackoff')
    WHERE json_type(kept_options, '$.retryBackoff') IN ('integer', 'real');
UPDATE queues SET retry_delay_max = json_extract(kept_options, '$.retryDelayMax')
    WHERE json_type(kept_options, '$.retryDelayMax') = 'integer';
UPDATE queues SET max_replays = json_extract(kept_options, '$.maxReplays')
    WHERE json_type(kept_options, '$.maxReplays') = 'integer';
UPDATE queues SET dead_letter_archive = 1
    WHERE json_type(kept_options, '$.deadLetterArchive') = 'true';
UPDATE queues SET kept_options = json_remove(kept_options, '$.retryBackoff', '$.retryDelayMax', '$.maxReplays', '$.deadLetterArchive')
    WHERE json_type(kept_options, '$.retryBackoff') IS NOT NULL
       OR json_type(kept_options, '$.retryDelayMax') IS NOT NULL
       OR json_type(kept_options, '$.maxReplays') IS NOT NULL
       OR json_type(kept_options, '$.deadLetterArchive') IS NOT NULL;
