-- The login limiter's counts: SQLite's migration 0028, in PostgreSQL's
-- types (see it for what the columns hold).
CREATE TABLE login_failures (
    key     TEXT COLLATE "C" PRIMARY KEY,
    n       BIGINT NOT NULL,
    last_at BIGINT NOT NULL,
    seq     BIGINT NOT NULL
);
CREATE UNIQUE INDEX login_failures_seq ON login_failures (seq);
