package broker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// Session lifetimes. A dashboard session ends after SessionIdle without a
// request (sliding: every request moves the end), and SessionMaxAge after
// its login whatever happens; the user then logs in again.
const (
	SessionIdle   = 12 * time.Hour
	SessionMaxAge = 7 * 24 * time.Hour
	// sessionTouchEvery bounds how often a session's last use is written:
	// a page view should not always write.
	sessionTouchEvery = time.Minute
)

// ErrDenied is the kind of a refused login.
var ErrDenied = errors.New("denied")

// Session is a user's dashboard session. Only a hash of its id is kept, so
// that the database alone cannot be used to take one over.
type Session struct {
	ID         int64
	UserID     int64
	Hash       string
	CreatedAt  time.Time
	ExpiresAt  time.Time // CreatedAt + SessionMaxAge
	LastSeenAt time.Time
}

// live reports whether the session may still be used at now.
func (s Session) live(now time.Time) bool {
	return now.Before(s.ExpiresAt) && now.Before(s.LastSeenAt.Add(SessionIdle))
}

// SessionTx is the storage sessions need.
//
// Each method reads or writes sessions only, by a key (SweepSessions: a
// scan), and locks nothing beyond its transaction (Tx).
type SessionTx interface {
	// InsertSession writes s as a new session (its hash, never the
	// cookie's value) and sets s.ID.
	InsertSession(ctx context.Context, s *Session) error
	// SessionByHash reads the session whose hash is hash, by its unique
	// index (ErrNotFound), whether or not it is still live.
	SessionByHash(ctx context.Context, hash string) (Session, error)
	// TouchSession moves the session's last sight forward to at (never
	// back: an earlier at writes nothing); a session that is not there:
	// nothing, no error.
	TouchSession(ctx context.Context, id int64, at time.Time) error
	// DeleteSession deletes the session whose hash is hash; none: no
	// error.
	DeleteSession(ctx context.Context, hash string) error
	// DeleteUserSessions deletes every session of a user; none: no
	// error.
	DeleteUserSessions(ctx context.Context, userID int64) error
	// SweepSessions deletes up to limit sessions that ended at now or
	// were last seen at idleSince or before (writes sessions only; a scan:
	// the table holds a few sessions a person) and returns how many.
	SweepSessions(ctx context.Context, now, idleSince time.Time, limit int) (int64, error)
}

// LoginRequest is an attempt to log in to the dashboard.
type LoginRequest struct {
	Name string
	// CheckFunc reports whether the password given is the one of hash. It
	// is called for unknown users too, with an empty hash, so that they
	// take as long as known ones.
	CheckFunc func(hash string) bool
	// From is the client's address, for the audit trail.
	From string
	// Replaces is the session the client had, if any: it ends, so that
	// every login gets a new session id.
	Replaces string
}

// Login checks a user's password and, when it is right, opens a session
// and returns its secret id (to be sent to the client, never stored). A
// wrong password and an unknown user fail alike, with ErrDenied. Both
// outcomes are audited, a failure with the name typed only when it is a
// user's ("unknown user" otherwise); the password never is.
func (b *Broker) Login(ctx context.Context, r LoginRequest) (string, User, error) {
	u, err := b.UserByName(ctx, r.Name)
	known := err == nil
	if err != nil && !isNotFound(err) {
		return "", User{}, err
	}
	if !known {
		u = User{}
	}
	// A single sign-on user has no password: refused whatever the check
	// says (it still runs, so that the answer takes as long).
	if !r.CheckFunc(u.PasswordHash) || !known || u.Subject != "" {
		// The name typed is kept only when it is a user's: the name of no
		// user is often a password typed into the wrong field.
		detail := "failed login as unknown user from " + r.From
		if known {
			detail = fmt.Sprintf("failed login as %q from %s", truncate(r.Name, 64), r.From)
		}
		if err := b.Record(ctx, "anonymous", AuditLoginFailed, detail); err != nil {
			return "", User{}, err
		}
		return "", User{}, errorf(ErrDenied, "wrong user name or password")
	}
	var secret string
	err = b.update(ctx, func(tx Tx, _ func(string)) error {
		now := b.now()
		if r.Replaces != "" {
			if err := tx.DeleteSession(ctx, HashToken(r.Replaces)); err != nil {
				return err
			}
		}
		var err error
		if secret, err = newSession(ctx, tx, u.ID, now); err != nil {
			return err
		}
		return audit(ctx, tx, now, "user:"+u.Name, AuditLogin, "", "", 0, "logged in from "+r.From)
	})
	if err != nil {
		return "", User{}, err
	}
	return secret, u, nil
}

// CreateSession opens a session for a user without a password: for tools
// and tests. Login is the way in for people.
func (b *Broker) CreateSession(ctx context.Context, userID int64) (string, error) {
	var secret string
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		if _, err := userByID(ctx, tx, userID); err != nil {
			return err
		}
		var err error
		secret, err = newSession(ctx, tx, userID, b.now())
		return err
	})
	return secret, err
}

// newSession stores a new session and returns its secret id. The
// sessions that have ended are swept by Maintain.
func newSession(ctx context.Context, tx SessionTx, userID int64, now time.Time) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	secret := base64.RawURLEncoding.EncodeToString(raw[:])
	s := Session{UserID: userID, Hash: HashToken(secret), CreatedAt: now, ExpiresAt: now.Add(SessionMaxAge), LastSeenAt: now}
	if err := tx.InsertSession(ctx, &s); err != nil {
		return "", fmt.Errorf("insert session: %w", err)
	}
	return secret, nil
}

// SessionUser returns the user of a live session, with their current role,
// and moves the session's idle end. An unknown or ended session is
// ErrNotFound.
func (b *Broker) SessionUser(ctx context.Context, secret string) (User, error) {
	if secret == "" {
		return User{}, errorf(ErrNotFound, "no session")
	}
	now := b.now()
	var s Session
	var u User
	err := b.store.View(ctx, func(tx Tx) (err error) {
		if s, err = tx.SessionByHash(ctx, HashToken(secret)); err != nil {
			return err
		}
		u, err = tx.UserByID(ctx, s.UserID)
		return err
	})
	if isNotFound(err) || (err == nil && !s.live(now)) {
		return User{}, errorf(ErrNotFound, "no session")
	}
	if err != nil {
		return User{}, err
	}
	if now.Sub(s.LastSeenAt) >= sessionTouchEvery {
		err := b.update(ctx, func(tx Tx, _ func(string)) error { return tx.TouchSession(ctx, s.ID, now) })
		if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNoSpace) || errors.Is(err, ErrCommitUnknown) {
			// A busy database, or a full disk, or a connection lost at
			// commit, must not shut people out of the pages that only
			// read: the idle end moves at the next request instead.
			b.log.WarnContext(ctx, "session idle end not moved: database cannot be written", "error", err)
		} else if err != nil {
			return User{}, fmt.Errorf("touch session: %w", err)
		}
	}
	return u, nil
}

// Logout ends a session and audits it; an unknown session is no error.
func (b *Broker) Logout(ctx context.Context, secret, from string) error {
	if secret == "" {
		return nil
	}
	return b.update(ctx, func(tx Tx, _ func(string)) error {
		s, err := tx.SessionByHash(ctx, HashToken(secret))
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := tx.DeleteSession(ctx, s.Hash); err != nil {
			return err
		}
		u, err := tx.UserByID(ctx, s.UserID)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return audit(ctx, tx, b.now(), "user:"+u.Name, AuditLogout, "", "", 0, "logged out from "+from)
	})
}
