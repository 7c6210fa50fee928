-- Whether a consumer group's subscription may read messages older than
-- itself (issue 16, completed retention): 1 when it started from the
-- beginning or from a time (its cursors may start behind a partition's
-- settle marks, which then no longer say when every group had settled),
-- 0 when it started after everything already pushed (subscriptionMode
-- new: its cursors start at each partition's newest message, at or past
-- every mark made before it). Subscriptions made before this migration
-- count as 1, the cautious answer.
ALTER TABLE subscriptions ADD COLUMN reads_back INTEGER NOT NULL DEFAULT 1;
