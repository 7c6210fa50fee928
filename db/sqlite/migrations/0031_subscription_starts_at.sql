-- Where a consumer group's subscription to a queue starts (Queen's
-- consumer-group metadata, kept by DELETE /consumer-groups/:group with
-- deleteMetadata=false): the time in milliseconds it reads from (the
-- first message pushed at or after it; 0 or less: from the beginning).
-- Subscribe records it (subscriptionMode new: the time it subscribed),
-- a move of the subscription's time records the new one. NULL: not
-- known, a subscription made before this migration that may have
-- started from a time; one that started after everything already pushed
-- (reads_back 0, migration 0023) started at the time it subscribed.
ALTER TABLE subscriptions ADD COLUMN starts_at INTEGER;
UPDATE subscriptions SET starts_at = subscribed_at WHERE reads_back = 0;
