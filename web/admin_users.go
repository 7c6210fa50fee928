package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/password"
	"github.com/lazarus-dlq/lazarus/views"
)

// usersURL is the admin page of users and tokens.
const usersURL = "/admin/users"

// roleNames are the roles in the order the forms offer them.
var roleNames = []string{string(RoleViewer), string(RoleOperator), string(RoleAdmin)}

// showUsers lists the users and every API token, with the forms that
// change them (admins only).
func (s *Server) showUsers(c echo.Context) error {
	ctx := c.Request().Context()
	users, err := s.broker.Users(ctx)
	if err != nil {
		return err
	}
	me, _ := visitorFrom(c)
	v := views.Users{Page: s.page(c, "Users and API tokens", "users"), Roles: roleNames}
	for _, u := range users {
		v.Users = append(v.Users, views.UserRow{ID: u.ID, Name: u.Name, Role: string(u.Role), Queues: u.Queues.String(), CreatedAt: u.CreatedAt, Self: u.ID == me.user.ID, SSO: u.Subject != ""})
		tokens, err := s.broker.Tokens(ctx, u.ID)
		if err != nil {
			return err
		}
		for _, t := range tokens {
			v.Tokens = append(v.Tokens, views.TokenRow{ID: t.ID, UserID: t.UserID, User: t.User, Role: string(t.Role),
				Name: t.Name, Queues: t.Scope().String(), Created: t.CreatedAt, LastUsed: t.LastUsedAt})
		}
	}
	if v.Flash, v.NewToken, err = s.takeFlash(c); err != nil {
		return err
	}
	return renderPage(c, http.StatusOK, views.UsersView(v), views.UsersContent(v))
}

// everyQueueAdmin refuses (403) to an admin limited to some queues what
// spans every queue: changing users or tokens (such an admin could give
// a user, a token or themself the queues they do not see) and the
// notifications (their rules and deliveries name every queue's events).
func (s *Server) everyQueueAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !scopeOf(c.Request().Context()).All() {
			return &apiError{status: http.StatusForbidden, message: "this is for an admin who sees every queue"}
		}
		return next(c)
	}
}

// createUser adds a user with a role, a password and the queues they see.
func (s *Server) createUser(c echo.Context) error {
	name := strings.TrimSpace(c.FormValue("name"))
	role := Role(c.FormValue("role"))
	queues, err := broker.ParseQueueScope(c.FormValue("queues"))
	if err != nil {
		return s.backToUsers(c, "", err)
	}
	hash, err := password.Hash(c.FormValue("password"), s.bcryptCost)
	if errors.Is(err, password.ErrRefused) {
		return s.backToUsers(c, "", shownError(err.Error()))
	}
	if err != nil {
		return err
	}
	_, err = s.broker.CreateUserWith(c.Request().Context(), broker.UserParams{Name: name, Role: role, PasswordHash: hash, Queues: &queues}, actor(c))
	return s.backToUsers(c, fmt.Sprintf("User %s created with the role %s.", name, role), err)
}

// setUserQueues changes the queues a user sees, from their next request.
func (s *Server) setUserQueues(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return s.backToUsers(c, "", err)
	}
	queues, err := broker.ParseQueueScope(c.FormValue("queues"))
	if err != nil {
		return s.backToUsers(c, "", err)
	}
	err = s.broker.SetUserQueues(c.Request().Context(), id, queues, actor(c))
	what := "every queue"
	if !queues.All() {
		what = "the queues " + queues.String()
	}
	return s.backToUsers(c, "The user now sees "+what+".", err)
}

// setUserRole changes a user's role; the broker keeps the last admin.
func (s *Server) setUserRole(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return s.backToUsers(c, "", err)
	}
	role := Role(c.FormValue("role"))
	err = s.broker.SetUserRole(c.Request().Context(), id, role, actor(c))
	return s.backToUsers(c, fmt.Sprintf("Role changed to %s.", role), err)
}

// deleteUser deletes a user with their tokens and sessions; the broker
// keeps the last admin, and nobody deletes themself here.
func (s *Server) deleteUser(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return s.backToUsers(c, "", err)
	}
	if me, _ := visitorFrom(c); me.user.ID == id {
		return s.backToUsers(c, "", shownError("you cannot delete yourself; another admin can"))
	}
	u, err := s.broker.UserByID(c.Request().Context(), id)
	if err != nil {
		return s.backToUsers(c, "", err)
	}
	err = s.broker.DeleteUser(c.Request().Context(), id, actor(c))
	return s.backToUsers(c, fmt.Sprintf("User %s deleted, with their API tokens and sessions.", u.Name), err)
}

// createToken makes an API token for a user; its secret is shown once,
// on the page the redirect leads to.
func (s *Server) createToken(c echo.Context) error {
	userID, err := strconv.ParseInt(c.FormValue("user"), 10, 64)
	if err != nil {
		return s.backToUsers(c, "", shownError("choose the user the token is for"))
	}
	queues, err := broker.ParseQueueScope(c.FormValue("queues"))
	if err != nil {
		return s.backToUsers(c, "", err)
	}
	secret, t, err := s.broker.CreateTokenWith(c.Request().Context(), broker.TokenParams{UserID: userID, Name: c.FormValue("name"), Queues: queues}, actor(c))
	if err != nil {
		return s.backToUsers(c, "", err)
	}
	msg := fmt.Sprintf("Token %s created for %s (role %s). Copy it now: it is not shown again.", t.Name, t.User, t.Role)
	if err := s.setFlash(c, views.Flash{Kind: "ok", Text: msg}, secret); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, usersURL)
}

// revokeToken deletes one of a user's API tokens.
func (s *Server) revokeToken(c echo.Context) error {
	userID, err := idParam(c, "id")
	if err != nil {
		return s.backToUsers(c, "", err)
	}
	tokenID, err := idParam(c, "token")
	if err != nil {
		return s.backToUsers(c, "", err)
	}
	err = s.broker.RevokeToken(c.Request().Context(), tokenID, userID, actor(c))
	return s.backToUsers(c, "Token revoked: it no longer opens the API.", err)
}

// shownError is an error whose text is for the admin to read.
type shownError string

func (e shownError) Error() string { return string(e) }

// backToUsers redirects (303) to the users page with a flash: ok when err
// is nil, else the error's safe text. Internal errors are not shown: they
// are answered as such.
func (s *Server) backToUsers(c echo.Context, ok string, err error) error {
	f := views.Flash{Kind: "ok", Text: ok}
	var be *broker.Error
	var shown shownError
	switch {
	case err == nil:
	case errors.As(err, &be):
		f = views.Flash{Kind: "error", Text: capitalize(be.Message) + "."}
	case errors.As(err, &shown):
		f = views.Flash{Kind: "error", Text: capitalize(shown.Error()) + "."}
	case errors.Is(err, broker.ErrNotFound):
		f = views.Flash{Kind: "error", Text: "Not found: it may have been deleted already."}
	default:
		return err
	}
	if err := s.setFlash(c, f, ""); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, usersURL)
}

// idParam reads a numeric path parameter.
func idParam(c echo.Context, name string) (int64, error) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, shownError("no such " + name)
	}
	return id, nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
