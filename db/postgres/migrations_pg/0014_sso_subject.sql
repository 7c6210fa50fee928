-- Single sign-on: SQLite's migration 0037 says what the column holds ('':
-- a local user) and why the partial unique index.
ALTER TABLE users ADD COLUMN sso_subject TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE UNIQUE INDEX users_sso_subject ON users (sso_subject) WHERE sso_subject <> '';
