-- The groups whose replay outcome is still to come: a replayed copy's
-- outcome counts (completed, or failed again) only in a group that had
-- dead-lettered the original. A row goes when that group settles the copy.
CREATE TABLE replay_outcomes (
    copy_seq INTEGER NOT NULL,
    group_id INTEGER NOT NULL,
    PRIMARY KEY (copy_seq, group_id)
) STRICT, WITHOUT ROWID;
