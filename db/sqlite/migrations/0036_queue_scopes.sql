-- Queue scopes (DASHBOARD.md, "Who sees what"; broker.QueueScope): the
-- queues a user, and each of a user's API tokens, may see. A queue out of
-- scope is as if absent to them.
--
-- queues: the scope as broker.QueueScope.String writes it, the patterns
-- sorted and joined by ", " ("billing, orders*"), read back by
-- broker.ParseQueueScope. '' is every queue: every row written before
-- this migration. A request with a token sees the queues both the
-- token's and its user's scope allow.
ALTER TABLE users ADD COLUMN queues TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN queues TEXT NOT NULL DEFAULT '';
