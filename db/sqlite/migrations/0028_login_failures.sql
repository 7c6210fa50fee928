-- The login limiter's counts (web/login_limit.go, broker/loginlimit.go),
-- kept in the store so that every process of one database sees the same
-- counts (issue 18): an attacker spread over processes behind a load
-- balancer no longer gets a fresh count on each. A row is one key of the
-- limiter (a client address or a user name), as the SHA-256 of the key in
-- hex: a name typed is often a password typed into the wrong field, and
-- is not kept. n is the failures in a row counted against it, last_at
-- (Unix ms) when the last was counted, seq the order of the counts: it
-- grows with each one (one writer), so that the bound (at most
-- broker.LoginMaxKeys rows, the least recently counted go first) and the
-- maintenance's sweep of the rows past broker.LoginForget walk its index
-- from the oldest.
CREATE TABLE login_failures (
    key     TEXT    PRIMARY KEY,
    n       INTEGER NOT NULL,
    last_at INTEGER NOT NULL,
    seq     INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX login_failures_seq ON login_failures (seq);
