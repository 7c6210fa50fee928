-- Where a consumer group's subscription to a queue starts: SQLite's
-- migration 0031 says what it holds and why.
ALTER TABLE subscriptions ADD COLUMN starts_at BIGINT;
UPDATE subscriptions SET starts_at = subscribed_at WHERE reads_back = 0;
