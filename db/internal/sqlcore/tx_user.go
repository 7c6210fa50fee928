package sqlcore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

const userCols = `id, name, role, password_hash, queues, sso_subject, created_at`

func scanUser(s interface{ Scan(...any) error }) (broker.User, error) {
	var u broker.User
	var role, queues string
	var created int64
	if err := s.Scan(&u.ID, &u.Name, &role, &u.PasswordHash, &queues, &u.Subject, &created); err != nil {
		return u, err
	}
	u.Role, u.CreatedAt = broker.Role(role), FromMS(created)
	var err error
	u.Queues, err = storedScope(queues)
	return u, err
}

// storedScope reads a users.queues or tokens.queues column (migration
// 0036): the broker wrote it with QueueScope.String, so a text that does
// not parse is a damaged row. It fails the read rather than be taken for
// every queue.
func storedScope(s string) (broker.QueueScope, error) {
	sc, err := broker.ParseQueueScope(s)
	if err != nil {
		return broker.QueueScope{}, fmt.Errorf("stored queue scope: %w", err)
	}
	return sc, nil
}

// UserByName reads users by UNIQUE(name).
func (t *Tx) UserByName(ctx context.Context, name string) (broker.User, error) {
	u, err := scanUser(t.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE name = ?`, name))
	return u, notFound(err, "user")
}

// UserBySubject reads users by the partial unique index on sso_subject
// (migration 0037); "" is no single sign-on user's.
func (t *Tx) UserBySubject(ctx context.Context, subject string) (broker.User, error) {
	if subject == "" {
		return broker.User{}, notFound(sql.ErrNoRows, "user")
	}
	u, err := scanUser(t.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE sso_subject = ? AND sso_subject <> ''`, subject))
	return u, notFound(err, "user")
}

// UserByID reads users by the primary key.
func (t *Tx) UserByID(ctx context.Context, id int64) (broker.User, error) {
	u, err := scanUser(t.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE id = ?`, id))
	return u, notFound(err, "user")
}

// Users reads users whole, by name.
func (t *Tx) Users(ctx context.Context) ([]broker.User, error) {
	rows, err := t.Query(ctx, `SELECT `+userCols+` FROM users ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// SaveUser updates users by the primary key (ID set) or inserts a row
// and takes its rowid; a name taken fails on UNIQUE(name).
func (t *Tx) SaveUser(ctx context.Context, u *broker.User) error {
	if u.ID != 0 {
		_, err := t.Exec(ctx, `UPDATE users SET name = ?, role = ?, password_hash = ?, queues = ? WHERE id = ?`, u.Name, string(u.Role), u.PasswordHash, u.Queues.String(), u.ID)
		return err
	}
	var err error
	_, u.ID, err = t.Insert(ctx, "id", `INSERT INTO users (name, role, password_hash, queues, sso_subject, created_at) VALUES (?, ?, ?, ?, ?, ?)`, u.Name, string(u.Role), u.PasswordHash, u.Queues.String(), u.Subject, MS(u.CreatedAt))
	return err
}

// DeleteUser deletes the user's tokens and sessions, then the users row.
func (t *Tx) DeleteUser(ctx context.Context, id int64) error {
	if _, err := t.Exec(ctx, `DELETE FROM tokens WHERE user_id = ?`, id); err != nil {
		return err
	}
	if err := t.DeleteUserSessions(ctx, id); err != nil {
		return err
	}
	_, err := t.Exec(ctx, `DELETE FROM users WHERE id = ?`, id)
	return err
}

// InsertToken inserts a row of tokens and takes its rowid as t.ID.
func (t *Tx) InsertToken(ctx context.Context, tok *broker.Token) error {
	var err error
	_, tok.ID, err = t.Insert(ctx, "id", `INSERT INTO tokens (user_id, name, hash, queues, created_at) VALUES (?, ?, ?, ?, ?)`, tok.UserID, tok.Name, tok.Hash, tok.Queues.String(), MS(tok.CreatedAt))
	return err
}

const tokenSelect = `SELECT t.id, t.user_id, u.name, u.role, t.name, t.hash, t.queues, u.queues, t.created_at, t.last_used_at FROM tokens t JOIN users u ON u.id = t.user_id`

func scanToken(s interface{ Scan(...any) error }) (broker.Token, error) {
	var tok broker.Token
	var role, queues, userQueues string
	var created, used int64
	if err := s.Scan(&tok.ID, &tok.UserID, &tok.User, &role, &tok.Name, &tok.Hash, &queues, &userQueues, &created, &used); err != nil {
		return tok, err
	}
	tok.Role, tok.CreatedAt, tok.LastUsedAt = broker.Role(role), FromMS(created), FromMS(used)
	var err error
	if tok.Queues, err = storedScope(queues); err != nil {
		return tok, err
	}
	tok.UserQueues, err = storedScope(userQueues)
	return tok, err
}

// TokenByHash reads tokens by UNIQUE(hash), joined to its user.
func (t *Tx) TokenByHash(ctx context.Context, hash string) (broker.Token, error) {
	tok, err := scanToken(t.QueryRow(ctx, tokenSelect+` WHERE t.hash = ?`, hash))
	return tok, notFound(err, "token")
}

// Tokens reads the user's tokens, joined to the user, by id.
func (t *Tx) Tokens(ctx context.Context, userID int64) ([]broker.Token, error) {
	rows, err := t.Query(ctx, tokenSelect+` WHERE t.user_id = ? ORDER BY t.id`, userID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.Token
	for rows.Next() {
		tok, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, tok)
	}
	return out, rows.Err()
}

// DeleteToken deletes the token by the primary key and its user;
// ErrNotFound when no row went.
func (t *Tx) DeleteToken(ctx context.Context, id, userID int64) error {
	res, err := t.Exec(ctx, `DELETE FROM tokens WHERE id = ? AND user_id = ?`, id, userID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound(errNoRows, "token")
	}
	return nil
}

// TouchToken sets last_used_at by the primary key.
func (t *Tx) TouchToken(ctx context.Context, id int64, at time.Time) error {
	_, err := t.Exec(ctx, `UPDATE tokens SET last_used_at = ? WHERE id = ?`, MS(at), id)
	return err
}

// Setting reads settings by the primary key.
func (t *Tx) Setting(ctx context.Context, key string) (string, error) {
	var v string
	err := t.QueryRow(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&v)
	return v, notFound(err, "setting")
}

// SetSetting upserts settings by the primary key.
func (t *Tx) SetSetting(ctx context.Context, key, value string) error {
	_, err := t.Exec(ctx, `INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
	return err
}

// InsertSession inserts a row of sessions and takes its rowid as s.ID.
func (t *Tx) InsertSession(ctx context.Context, s *broker.Session) error {
	var err error
	_, s.ID, err = t.Insert(ctx, "id", `INSERT INTO sessions (hash, user_id, created_at, expires_at, last_seen_at) VALUES (?, ?, ?, ?, ?)`,
		s.Hash, s.UserID, MS(s.CreatedAt), MS(s.ExpiresAt), MS(s.LastSeenAt))
	return err
}

// SessionByHash reads sessions by UNIQUE(hash).
func (t *Tx) SessionByHash(ctx context.Context, hash string) (broker.Session, error) {
	var s broker.Session
	var created, expires, seen int64
	err := t.QueryRow(ctx, `SELECT id, hash, user_id, created_at, expires_at, last_seen_at FROM sessions WHERE hash = ?`, hash).
		Scan(&s.ID, &s.Hash, &s.UserID, &created, &expires, &seen)
	s.CreatedAt, s.ExpiresAt, s.LastSeenAt = FromMS(created), FromMS(expires), FromMS(seen)
	return s, notFound(err, "session")
}

// TouchSession moves last_seen_at forward by the primary key.
func (t *Tx) TouchSession(ctx context.Context, id int64, at time.Time) error {
	_, err := t.Exec(ctx, `UPDATE sessions SET last_seen_at = ? WHERE id = ? AND last_seen_at < ?`, MS(at), id, MS(at))
	return err
}

// DeleteSession deletes sessions by UNIQUE(hash).
func (t *Tx) DeleteSession(ctx context.Context, hash string) error {
	_, err := t.Exec(ctx, `DELETE FROM sessions WHERE hash = ?`, hash)
	return err
}

// DeleteUserSessions deletes the user's sessions (a scan: the table
// holds a few rows a person).
func (t *Tx) DeleteUserSessions(ctx context.Context, userID int64) error {
	_, err := t.Exec(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID)
	return err
}
