-- What Queen's clients send to configure beyond Lazarus's first options
-- (SPEC.md section 2): a queue's namespace and task (NULL: none given),
-- delayedProcessing (seconds, enforced: ReadyConsumers and NextWake read
-- it), and the options Lazarus accepts and keeps without enforcing them
-- (a JSON object of name to value, shown as "not enforced").
ALTER TABLE queues ADD COLUMN namespace TEXT;
ALTER TABLE queues ADD COLUMN task TEXT;
ALTER TABLE queues ADD COLUMN delayed_processing INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN kept_options TEXT NOT NULL DEFAULT '{}';
