-- Masking (issue 34, broker/mask.go): a queue's masked payload fields,
-- its JSON paths one a line ('' none), and the role that may reveal them
-- (operator or admin).
ALTER TABLE queues ADD COLUMN mask_paths TEXT NOT NULL DEFAULT '';
ALTER TABLE queues ADD COLUMN mask_reveal_role TEXT NOT NULL DEFAULT 'admin';
