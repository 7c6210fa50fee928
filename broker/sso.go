package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// SSOGroup is what the members of one value of the mapped claim get (a
// group of the provider's, in the "groups" claim): a role, and the queues
// they may see (the zero scope: every queue).
type SSOGroup struct {
	Value  string
	Role   Role
	Queues QueueScope
}

// SSOMapping turns the values of one claim of an OpenID provider's ID
// token into a role and a queue scope (DASHBOARD.md, "Who sees what").
type SSOMapping struct {
	// Claim names the claim read ("groups"); Groups maps its values.
	Claim  string
	Groups []SSOGroup
}

// Map returns the role and the queues of a user whose claim holds values:
// the highest role of the groups they are in, and the queues of all of
// them (every queue when one of them has no limit). No group: role "".
func (m SSOMapping) Map(values []string) (Role, QueueScope, error) {
	var role Role
	var patterns []string
	all := false
	for _, g := range m.Groups {
		if !slices.Contains(values, g.Value) {
			continue
		}
		if g.Role.rank() > role.rank() {
			role = g.Role
		}
		if g.Queues.All() {
			all = true
		} else {
			patterns = append(patterns, g.Queues.String())
		}
	}
	if role == "" || all {
		return role, QueueScope{}, nil
	}
	// The groups' scopes are each one list of patterns (ParseQueueScope):
	// their union is the list of all their patterns.
	sc, err := ParseQueueScope(strings.Join(patterns, ","))
	if err != nil {
		return "", QueueScope{}, fmt.Errorf("the queues of the groups: %w", err)
	}
	return role, sc, nil
}

// SSOLoginRequest is a login through an OpenID provider whose ID token
// was verified (web/sso.go): who the provider says the person is, and
// what the claims give them.
type SSOLoginRequest struct {
	// Subject is the provider's issuer URL and the token's subject, which
	// never changes for one person ("https://idp.example abc123").
	Subject string
	// Name is the user name to make at the first login (the claim chosen,
	// e.g. preferred_username); later logins keep the name they made.
	Name string
	// Role and Queues are the claims' mapping (SSOMapping.Map); Role ""
	// (no group maps to a role) is refused.
	Role   Role
	Queues QueueScope
	// From and Replaces are as in LoginRequest.
	From     string
	Replaces string
}

// SSO refusals: what the person is told (the page says it as it is).
const (
	SSONoRole    = "Your account at the single sign-on provider has no role in Lazarus: none of its groups is mapped to one. Ask an admin to add you to a group that is."
	SSONameTaken = "The user name your provider gives you is a local user's of Lazarus: a single sign-on login cannot take it over. Ask an admin."
)

// Why a first single sign-on makes no user, in the audit trail.
const (
	whyNoName  = "no name claim"
	whyBadName = "the name claim is not a valid user name"
)

// SSOLogin opens a session for a person the OpenID provider vouched for:
// the user of that subject, made at the first login with the name given,
// their role and queues set from the claims at every login. A local user
// (one with a password) is never taken over: a name that is theirs, or
// another subject's, is refused, as is a person whose claims give no
// role. Refusals are ErrDenied (the message says why) and audited as
// login_failed.
func (b *Broker) SSOLogin(ctx context.Context, r SSOLoginRequest) (string, User, error) {
	if r.Subject == "" {
		return "", User{}, errorf(ErrInvalid, "a single sign-on login needs a subject")
	}
	if r.Role != "" && !r.Role.Valid() {
		return "", User{}, errorf(ErrInvalid, "role must be viewer, operator or admin, got %q", truncate(string(r.Role), 32))
	}
	refuse := func(why, msg string) (string, User, error) {
		detail := fmt.Sprintf("failed single sign-on as %q from %s: %s", truncate(r.Name, 64), r.From, why)
		if err := b.Record(ctx, "anonymous", AuditLoginFailed, detail); err != nil {
			return "", User{}, err
		}
		return "", User{}, errorf(ErrDenied, "%s", msg)
	}
	if r.Role == "" {
		return refuse("no group maps to a role", SSONoRole)
	}
	var secret string
	var u User
	var why string
	err := b.update(ctx, func(tx Tx, _ func(string)) error {
		now := b.now()
		var err error
		u, err = tx.UserBySubject(ctx, r.Subject)
		switch {
		case isNotFound(err):
			if r.Name == "" {
				why = whyNoName
				return nil
			}
			if err := checkUser(r.Name, r.Role); err != nil {
				why = whyBadName
				return nil
			}
			if other, err := tx.UserByName(ctx, r.Name); err == nil {
				why = "the name is a local user's"
				if other.Subject != "" {
					why = "the name is another single sign-on user's"
				}
				return nil
			} else if !isNotFound(err) {
				return err
			}
			u = User{Name: r.Name, Subject: r.Subject, CreatedAt: now}
		case err != nil:
			return err
		}
		made := u.ID == 0
		changed := made || u.Role != r.Role || !u.Queues.Equal(r.Queues)
		u.Role, u.Queues = r.Role, r.Queues
		if changed {
			if err := tx.SaveUser(ctx, &u); err != nil {
				return fmt.Errorf("save user: %w", err)
			}
		}
		if made {
			if err := audit(ctx, tx, now, "system", AuditUser, "", "", 1,
				fmt.Sprintf("user %s created at a single sign-on with role %s", u.Name, u.Role)); err != nil {
				return err
			}
		}
		if r.Replaces != "" {
			if err := tx.DeleteSession(ctx, HashToken(r.Replaces)); err != nil {
				return err
			}
		}
		if secret, err = newSession(ctx, tx, u.ID, now); err != nil {
			return err
		}
		detail := fmt.Sprintf("logged in through single sign-on from %s as %s", r.From, u.Role)
		if !u.Queues.All() {
			detail += " of queues " + truncate(u.Queues.String(), 200)
		}
		return audit(ctx, tx, now, "user:"+u.Name, AuditLogin, "", "", 0, detail)
	})
	if err != nil {
		return "", User{}, err
	}
	switch why {
	case "":
	case whyNoName:
		return refuse(why, "Your provider did not send the claim that names you in Lazarus (the name claim set at its start). Ask an admin.")
	case whyBadName:
		return refuse(why, "The user name your provider gives you cannot be a Lazarus user name ("+userNameRule+"). Ask an admin.")
	default:
		return refuse(why, SSONameTaken)
	}
	return secret, u, nil
}
