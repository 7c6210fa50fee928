package broker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Role is what a user or token may do.
type Role string

// Roles, each allowed what the one before it is.
const (
	RoleViewer   Role = "viewer"   // read everything
	RoleOperator Role = "operator" // also replay and delete
	RoleAdmin    Role = "admin"    // also users, tokens, queue options, purge
)

func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleOperator:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r.rank() > 0 }

// Allows reports whether r may do what needs role need.
func (r Role) Allows(need Role) bool { return r.Valid() && r.rank() >= need.rank() }

// User is a person who logs in to the dashboard.
type User struct {
	ID           int64
	Name         string
	Role         Role
	PasswordHash string // bcrypt; made and checked outside the broker
	// Subject is, for a user made by a single sign-on (SSOLogin), the
	// OpenID provider's issuer and the person's subject there; "" for a
	// local user, who logs in with a password. A single sign-on user has
	// no password.
	Subject string
	// Queues is the queues the user may see; the zero scope is every
	// queue (DASHBOARD.md, "Who sees what").
	Queues    QueueScope
	CreatedAt time.Time
}

// Token is a bearer token of a user for the JSON API. Only its hash is kept.
type Token struct {
	ID     int64
	UserID int64
	User   string
	Role   Role
	Name   string
	Hash   string
	// Queues is the token's own scope, within its user's: a request with
	// the token sees the queues both allow (Scope).
	Queues     QueueScope
	UserQueues QueueScope // the user's, read with the token
	CreatedAt  time.Time
	LastUsedAt time.Time
}

// Scope is the queues a request with t may see: those its user's scope
// and its own both allow.
func (t Token) Scope() QueueScope { return t.UserQueues.Narrow(t.Queues) }

// UserTx is the storage users, tokens and settings need.
//
// Each method reads or writes its own table (users, tokens, settings;
// DeleteUser also tokens and sessions), by a key or whole (Users), and
// locks nothing beyond its transaction (Tx).
type UserTx interface {
	// UserByName reads the user named name, by the unique name
	// (ErrNotFound).
	UserByName(ctx context.Context, name string) (User, error)
	// UserBySubject reads the single sign-on user of subject (User.Subject,
	// not ""), by its unique index (ErrNotFound).
	UserBySubject(ctx context.Context, subject string) (User, error)
	// UserByID reads the user id, by the primary key (ErrNotFound).
	UserByID(ctx context.Context, id int64) (User, error)
	// Users reads every user, by name (none: empty).
	Users(ctx context.Context) ([]User, error)
	// SaveUser inserts u (ID 0, and sets u.ID, with its Subject) or
	// writes its name, role, password hash and queue scope (a user that
	// is not there: nothing, no error); a user's Subject is never
	// changed. A
	// name taken is the store's unique-constraint error: the broker
	// checks UserByName first, in a write that runs alone (not marked
	// Concurrent).
	SaveUser(ctx context.Context, u *User) error
	// DeleteUser deletes the user id with its tokens and sessions; a
	// user that is not there deletes nothing (no error).
	DeleteUser(ctx context.Context, id int64) error
	// InsertToken writes t as a new API token (its hash, never the
	// token) and sets t.ID.
	InsertToken(ctx context.Context, t *Token) error
	// TokenByHash reads the token whose hash is hash, by its unique
	// index, with its user's name, role and queue scope (ErrNotFound).
	TokenByHash(ctx context.Context, hash string) (Token, error)
	// Tokens reads a user's tokens, oldest first (none: empty).
	Tokens(ctx context.Context, userID int64) ([]Token, error)
	// DeleteToken deletes the token id of user userID; ErrNotFound when
	// that user has no such token (another user's is not deleted).
	DeleteToken(ctx context.Context, id, userID int64) error
	// TouchToken sets the token's last use to at (not only forward,
	// unlike TouchSession); a token that is not there: nothing, no error.
	TouchToken(ctx context.Context, id int64, at time.Time) error
	// Setting reads the value of the setting key (ErrNotFound).
	Setting(ctx context.Context, key string) (string, error)
	// SetSetting writes the setting key, made or replaced in one
	// statement.
	SetSetting(ctx context.Context, key, value string) error
}

// User audit actions.
const (
	AuditLogin       = "login"
	AuditLoginFailed = "login_failed"
	AuditLogout      = "logout"
	AuditUser        = "user"
	AuditToken       = "token"
)

// userNameRule is what a user name may be (ValidUserName).
const userNameRule = "1-255 letters, digits, '.', '_', '-', '@' or '+'"

func checkUser(name string, role Role) error {
	if !ValidUserName(name) {
		return errorf(ErrInvalid, "user name %q must be %s", truncate(name, 64), userNameRule)
	}
	if !role.Valid() {
		return errorf(ErrInvalid, "role must be viewer, operator or admin, got %q", truncate(string(role), 32))
	}
	return nil
}

// UserParams is a user to create or put: CreateUserWith, PutUserWith.
type UserParams struct {
	Name         string
	Role         Role
	PasswordHash string // bcrypt; made and checked outside the broker
	// Queues is the queues the user may see. Nil: every queue for a new
	// user, and an existing user's scope unchanged (PutUserWith).
	Queues *QueueScope
}

// PutUser creates the user, or sets the role and password hash of the one
// that has the name (its queue scope unchanged); a changed password ends
// the user's sessions.
func (b *Broker) PutUser(ctx context.Context, name string, role Role, passwordHash, actor string) (User, error) {
	return b.PutUserWith(ctx, UserParams{Name: name, Role: role, PasswordHash: passwordHash}, actor)
}

// PutUserWith creates the user p names, or sets the role, password hash
// and (p.Queues not nil) queue scope of the one that has the name; a
// changed password ends the user's sessions.
func (b *Broker) PutUserWith(ctx context.Context, p UserParams, actor string) (User, error) {
	if err := checkUser(p.Name, p.Role); err != nil {
		return User{}, err
	}
	var u User
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		now := b.now()
		var err error
		u, err = tx.UserByName(ctx, p.Name)
		verb := "changed"
		if isNotFound(err) {
			u, verb = User{Name: p.Name, CreatedAt: now}, "created"
		} else if err != nil {
			return err
		} else if u.Subject != "" {
			return errorf(ErrConflict, "user %s logs in through single sign-on: it has no password", p.Name)
		}
		newPassword := u.ID != 0 && u.PasswordHash != p.PasswordHash
		u.Role, u.PasswordHash = p.Role, p.PasswordHash
		if p.Queues != nil {
			u.Queues = *p.Queues
		}
		if err := tx.SaveUser(ctx, &u); err != nil {
			return fmt.Errorf("save user: %w", err)
		}
		if newPassword {
			// A new password logs the user out everywhere.
			if err := tx.DeleteUserSessions(ctx, u.ID); err != nil {
				return fmt.Errorf("end sessions: %w", err)
			}
		}
		return audit(ctx, tx, now, actor, AuditUser, "", "", 1, fmt.Sprintf("user %s %s with role %s and %s", p.Name, verb, p.Role, scopeWords(u.Queues)))
	})
	return u, err
}

// scopeWords says a scope in an audit line.
func scopeWords(s QueueScope) string {
	if s.All() {
		return "every queue"
	}
	return "queues " + s.String()
}

// CreateUser creates a user who sees every queue; the name must be free.
func (b *Broker) CreateUser(ctx context.Context, name string, role Role, passwordHash, actor string) (User, error) {
	return b.CreateUserWith(ctx, UserParams{Name: name, Role: role, PasswordHash: passwordHash}, actor)
}

// CreateUserWith creates the user p names; the name must be free.
func (b *Broker) CreateUserWith(ctx context.Context, p UserParams, actor string) (User, error) {
	if err := checkUser(p.Name, p.Role); err != nil {
		return User{}, err
	}
	var u User
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		now := b.now()
		if _, err := tx.UserByName(ctx, p.Name); err == nil {
			return errorf(ErrConflict, "user %q already exists", p.Name)
		} else if !isNotFound(err) {
			return err
		}
		u = User{Name: p.Name, Role: p.Role, PasswordHash: p.PasswordHash, CreatedAt: now}
		if p.Queues != nil {
			u.Queues = *p.Queues
		}
		if err := tx.SaveUser(ctx, &u); err != nil {
			return fmt.Errorf("save user: %w", err)
		}
		return audit(ctx, tx, now, actor, AuditUser, "", "", 1, fmt.Sprintf("user %s created with role %s and %s", p.Name, p.Role, scopeWords(u.Queues)))
	})
	return u, err
}

// SetUserQueues changes the queues a user may see, at their next request
// (a session or token reads its user's scope each time).
func (b *Broker) SetUserQueues(ctx context.Context, id int64, queues QueueScope, actor string) error {
	return b.update(ctx, func(tx Tx, _ func(string)) error {
		u, err := userByID(ctx, tx, id)
		if err != nil {
			return err
		}
		u.Queues = queues
		if err := tx.SaveUser(ctx, &u); err != nil {
			return err
		}
		return audit(ctx, tx, b.now(), actor, AuditUser, "", "", 1, fmt.Sprintf("user %s now sees %s", u.Name, scopeWords(queues)))
	})
}

// SetUserRole changes a user's role. The last admin cannot be demoted.
func (b *Broker) SetUserRole(ctx context.Context, id int64, role Role, actor string) error {
	if !role.Valid() {
		return errorf(ErrInvalid, "role must be viewer, operator or admin")
	}
	return b.update(ctx, func(tx Tx, _ func(string)) error {
		u, err := userByID(ctx, tx, id)
		if err != nil {
			return err
		}
		if u.Role == RoleAdmin && role != RoleAdmin {
			if err := keepAnAdmin(ctx, tx, u.ID); err != nil {
				return err
			}
		}
		u.Role = role
		if err := tx.SaveUser(ctx, &u); err != nil {
			return err
		}
		return audit(ctx, tx, b.now(), actor, AuditUser, "", "", 1, fmt.Sprintf("user %s now has role %s", u.Name, role))
	})
}

// DeleteUser deletes a user with their tokens and sessions. The last
// admin stays.
func (b *Broker) DeleteUser(ctx context.Context, id int64, actor string) error {
	return b.update(ctx, func(tx Tx, _ func(string)) error {
		u, err := userByID(ctx, tx, id)
		if err != nil {
			return err
		}
		if u.Role == RoleAdmin {
			if err := keepAnAdmin(ctx, tx, u.ID); err != nil {
				return err
			}
		}
		if err := tx.DeleteUser(ctx, id); err != nil {
			return err
		}
		return audit(ctx, tx, b.now(), actor, AuditUser, "", "", 1, fmt.Sprintf("user %s deleted", u.Name))
	})
}

func userByID(ctx context.Context, tx UserTx, id int64) (User, error) {
	u, err := tx.UserByID(ctx, id)
	if isNotFound(err) {
		return u, errorf(ErrNotFound, "user %d not found", id)
	}
	return u, err
}

func keepAnAdmin(ctx context.Context, tx UserTx, leaving int64) error {
	users, err := tx.Users(ctx)
	if err != nil {
		return err
	}
	for _, o := range users {
		if o.Role == RoleAdmin && o.ID != leaving {
			return nil
		}
	}
	return errorf(ErrConflict, "the last admin cannot be removed or demoted")
}

// UserByName returns the named user.
func (b *Broker) UserByName(ctx context.Context, name string) (User, error) {
	var u User
	err := b.store.View(ctx, func(tx Tx) (err error) {
		u, err = tx.UserByName(ctx, name)
		return err
	})
	return u, err
}

// UserByID returns a user by id.
func (b *Broker) UserByID(ctx context.Context, id int64) (User, error) {
	var u User
	err := b.store.View(ctx, func(tx Tx) (err error) {
		u, err = userByID(ctx, tx, id)
		return err
	})
	return u, err
}

// Users lists every user.
func (b *Broker) Users(ctx context.Context) ([]User, error) {
	var out []User
	err := b.store.View(ctx, func(tx Tx) (err error) {
		out, err = tx.Users(ctx)
		return err
	})
	return out, err
}

// TokenPrefix starts every API token, so that a leaked one is recognisable.
const TokenPrefix = "lzr_"

// HashToken is the form in which a token is stored and looked up.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// CreateToken makes a new API token for a user, seeing what its user
// sees, and returns it in the clear: the only time it is ever shown.
func (b *Broker) CreateToken(ctx context.Context, userID int64, name, actor string) (string, Token, error) {
	return b.CreateTokenWith(ctx, TokenParams{UserID: userID, Name: name}, actor)
}

// TokenParams is a token to make: CreateTokenWith.
type TokenParams struct {
	UserID int64
	Name   string
	// Queues limits the token to fewer queues than its user: a request
	// with it sees the queues both allow (Token.Scope), so a scope wider
	// than the user's gives nothing more. The zero scope: its user's.
	Queues QueueScope
}

// CreateTokenWith makes a new API token and returns it in the clear: the
// only time it is ever shown.
func (b *Broker) CreateTokenWith(ctx context.Context, p TokenParams, actor string) (string, Token, error) {
	name := strings.TrimSpace(p.Name)
	if name == "" || len(name) > 100 {
		return "", Token{}, errorf(ErrInvalid, "token name must be 1-100 characters")
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Token{}, fmt.Errorf("token: %w", err)
	}
	secret := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	var t Token
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		now := b.now()
		u, err := userByID(ctx, tx, p.UserID)
		if err != nil {
			return err
		}
		t = Token{UserID: u.ID, User: u.Name, Role: u.Role, Name: name, Hash: HashToken(secret),
			Queues: p.Queues, UserQueues: u.Queues, CreatedAt: now}
		if err := tx.InsertToken(ctx, &t); err != nil {
			return err
		}
		what := fmt.Sprintf("token %q created for %s", name, u.Name)
		if !p.Queues.All() {
			what += " limited to queues " + p.Queues.String()
		}
		return audit(ctx, tx, now, actor, AuditToken, "", "", 1, what)
	})
	return secret, t, err
}

// Authenticate returns the token (with its user's current role) that
// secret is, and records its use.
func (b *Broker) Authenticate(ctx context.Context, secret string) (Token, error) {
	if !strings.HasPrefix(secret, TokenPrefix) {
		return Token{}, errorf(ErrNotFound, "unknown token")
	}
	var t Token
	err := b.store.View(ctx, func(tx Tx) (err error) {
		t, err = tx.TokenByHash(ctx, HashToken(secret))
		return err
	})
	if isNotFound(err) {
		return Token{}, errorf(ErrNotFound, "unknown token")
	}
	if err != nil {
		return Token{}, err
	}
	// Record the use at most once a minute: a read path should not write.
	if now := b.now(); now.Sub(t.LastUsedAt) > time.Minute {
		_ = b.update(ctx, func(tx Tx, _ func(string)) error { return tx.TouchToken(ctx, t.ID, now) })
	}
	return t, nil
}

// Tokens lists a user's tokens.
func (b *Broker) Tokens(ctx context.Context, userID int64) ([]Token, error) {
	var out []Token
	err := b.store.View(ctx, func(tx Tx) (err error) {
		out, err = tx.Tokens(ctx, userID)
		return err
	})
	return out, err
}

// RevokeToken deletes a user's token.
func (b *Broker) RevokeToken(ctx context.Context, id, userID int64, actor string) error {
	return b.update(ctx, func(tx Tx, _ func(string)) error {
		if err := tx.DeleteToken(ctx, id, userID); err != nil {
			return err
		}
		return audit(ctx, tx, b.now(), actor, AuditToken, "", "", 1, fmt.Sprintf("token %d revoked", id))
	})
}

// SessionKeys returns the keys that sign and encrypt session cookies,
// making and storing them the first time.
func (b *Broker) SessionKeys(ctx context.Context) (hashKey, blockKey []byte, err error) {
	const key = "session_keys"
	err = b.update(ctx, func(tx Tx, _ func(string)) error {
		v, err := tx.Setting(ctx, key)
		if isNotFound(err) {
			var k [64 + 32]byte
			if _, err := rand.Read(k[:]); err != nil {
				return err
			}
			v = hex.EncodeToString(k[:])
			if err := tx.SetSetting(ctx, key, v); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		raw, err := hex.DecodeString(v)
		if err != nil || len(raw) != 96 {
			return fmt.Errorf("stored session keys are malformed")
		}
		hashKey, blockKey = raw[:64], raw[64:]
		return nil
	})
	return hashKey, blockKey, err
}
