-- Dashboard sessions, server-side so that a logout really ends one. Only a
-- SHA-256 of the random session id is kept: the database alone cannot be
-- used to take a session over. A session ends at expires_at (login + 7 d)
-- or 12 h after last_seen_at, whichever comes first (broker/session.go).

CREATE TABLE sessions (
    id           INTEGER PRIMARY KEY,
    hash         TEXT    NOT NULL UNIQUE,
    user_id      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
) STRICT;
CREATE INDEX sessions_user ON sessions (user_id);
