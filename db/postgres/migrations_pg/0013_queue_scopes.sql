-- Queue scopes of users and tokens: SQLite's migration 0036 says what the
-- columns hold ('' is every queue).
ALTER TABLE users ADD COLUMN queues TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN queues TEXT COLLATE "C" NOT NULL DEFAULT '';
