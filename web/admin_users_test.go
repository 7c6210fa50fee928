package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// flash follows a POST's redirect to the users page and returns the page
// with the flash message it shows.
func (b *browser) followToUsers(r response) (response, string) {
	b.s.t.Helper()
	r.wantRedirect("/admin/users")
	page := b.get("/admin/users").want(http.StatusOK)
	return page, page.testid("flash")
}

func TestAdminUsers(t *testing.T) {
	t.Parallel()
	s := setup(t)
	admin, me := s.loggedIn(broker.RoleAdmin)

	t.Run("ListsUsers", func(t *testing.T) {
		s := s.sub(t)
		s.addUser("listed", broker.RoleOperator)
		page := admin.get("/admin/users").want(http.StatusOK)
		row := page.doc().Find(`[data-testid="user-listed"]`)
		if row.Length() != 1 || strings.TrimSpace(row.Find(`[data-testid="user-role"]`).Text()) != "operator" {
			t.Fatalf("row %q", row.Text())
		}
		self := page.doc().Find(`[data-testid="user-` + me.Name + `"]`)
		if !strings.Contains(self.Text(), "you") || self.Find(`[data-testid="delete-`+me.Name+`"]`).Length() != 0 {
			t.Fatalf("own row %q offers a delete", self.Text())
		}
		if tok, _ := page.doc().Find(`[data-testid="add-user"] input[name="_csrf"]`).Attr("value"); tok == "" {
			t.Fatal("the add-user form has no CSRF token")
		}
		if !strings.Contains(page.testid("whoami"), me.Name) {
			t.Fatal("the layout does not say who is logged in")
		}
	})
	t.Run("SetsAndShowsTheQueuesAUserSees", func(t *testing.T) {
		s := s.sub(t)
		res := admin.post("/admin/users", url.Values{"name": {"support"}, "role": {"viewer"}, "password": {"long enough password"}, "queues": {"orders*"}})
		admin.followToUsers(res)
		u, err := s.broker.UserByName(s.ctx, "support")
		if err != nil || u.Queues.String() != "orders*" {
			t.Fatalf("%+v %v", u, err)
		}
		res = admin.post(fmt.Sprintf("/admin/users/%d/queues", u.ID), url.Values{"queues": {"billing, orders*"}})
		page, flash := admin.followToUsers(res)
		if !strings.Contains(flash, "billing, orders*") {
			t.Fatalf("flash %q", flash)
		}
		if got := strings.TrimSpace(page.doc().Find(`[data-testid="user-support"] [data-testid="user-queues"]`).Text()); got != "billing, orders*" {
			t.Fatalf("queues shown %q", got)
		}
		res = admin.post(fmt.Sprintf("/admin/users/%d/queues", u.ID), url.Values{"queues": {"orders/eu"}})
		if _, flash := admin.followToUsers(res); !strings.Contains(flash, "only letters, digits") {
			t.Fatalf("a bad pattern: flash %q", flash)
		}
		if u, _ := s.broker.UserByName(s.ctx, "support"); u.Queues.String() != "billing, orders*" {
			t.Fatalf("a bad pattern changed the scope: %q", u.Queues)
		}
	})
	t.Run("CreatesAUser", func(t *testing.T) {
		s := s.sub(t)
		res := admin.post("/admin/users", url.Values{"name": {"carol"}, "role": {"operator"}, "password": {"long enough password"}})
		_, flash := admin.followToUsers(res)
		if !strings.Contains(flash, "carol") {
			t.Fatalf("flash %q", flash)
		}
		// The flash is shown once.
		if again := admin.get("/admin/users").testid("flash"); again != "" {
			t.Fatalf("flash shown twice: %q", again)
		}
		s.browser().login("carol", "long enough password").wantRedirect("/")
		u, err := s.broker.UserByName(s.ctx, "carol")
		if err != nil || u.Role != broker.RoleOperator || strings.Contains(u.PasswordHash, "long enough") {
			t.Fatalf("%+v %v", u, err)
		}
		entries, _ := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditUser, Actor: "user:" + me.Name}, broker.Page{})
		if len(entries) == 0 || !strings.Contains(entries[0].Detail, "carol") {
			t.Fatalf("audit %+v", entries)
		}
	})
	t.Run("RefusesShortPasswordsAndBadInput", func(t *testing.T) {
		s := s.sub(t)
		cases := []struct {
			form url.Values
			says string
		}{
			{url.Values{"name": {"dave"}, "role": {"viewer"}, "password": {"too short"}}, "at least 12"},
			{url.Values{"name": {"dave"}, "role": {"viewer"}, "password": {"zzzzzzzzzzzzzzzz"}}, "one character repeated"},
			{url.Values{"name": {"dave"}, "role": {"viewer"}, "password": {"Password12345!"}}, "most common passwords"},
			{url.Values{"name": {"carol"}, "role": {"viewer"}, "password": {"long enough password"}}, "already exists"},
			{url.Values{"name": {"dave"}, "role": {"god"}, "password": {"long enough password"}}, "viewer, operator or admin"},
			{url.Values{"name": {"not a name"}, "role": {"viewer"}, "password": {"long enough password"}}, "name"},
		}
		for _, c := range cases {
			_, flash := admin.followToUsers(admin.post("/admin/users", c.form))
			if !strings.Contains(flash, c.says) {
				t.Errorf("%v: flash %q, want %q", c.form, flash, c.says)
			}
		}
		if _, err := s.broker.UserByName(s.ctx, "dave"); err == nil {
			t.Fatal("dave was created")
		}
	})
	t.Run("ChangesARole", func(t *testing.T) {
		s := s.sub(t)
		u := s.addUser("erin", broker.RoleViewer)
		erin := s.browser()
		erin.login("erin", passwordOf("erin")).wantRedirect("/")
		erin.post("/queues/q/dead-letters/1/replay", nil).want(http.StatusForbidden)

		admin.followToUsers(admin.post("/admin/users/"+id(u.ID)+"/role", url.Values{"role": {"operator"}}))
		got, _ := s.broker.UserByID(s.ctx, u.ID)
		if got.Role != broker.RoleOperator {
			t.Fatalf("role %s", got.Role)
		}
		// The session follows the new role at once.
		if r := erin.post("/queues/q/dead-letters/1/replay", nil); r.status == http.StatusForbidden || r.status == http.StatusUnauthorized {
			t.Fatalf("after promotion: %d", r.status)
		}
	})
	t.Run("KeepsTheLastAdmin", func(t *testing.T) {
		s := s.sub(t)
		_, flash := admin.followToUsers(admin.post("/admin/users/"+id(me.ID)+"/role", url.Values{"role": {"viewer"}}))
		if !strings.Contains(flash, "last admin") {
			t.Fatalf("flash %q", flash)
		}
		_, flash = admin.followToUsers(admin.post("/admin/users/"+id(me.ID)+"/delete", nil))
		if !strings.Contains(flash, "cannot delete yourself") {
			t.Fatalf("flash %q", flash)
		}
		if got, _ := s.broker.UserByID(s.ctx, me.ID); got.Role != broker.RoleAdmin {
			t.Fatalf("role %s", got.Role)
		}
	})
	t.Run("DeletesAUserAndEndsTheirSession", func(t *testing.T) {
		s := s.sub(t)
		u := s.addUser("frank", broker.RoleViewer)
		frank := s.browser()
		frank.login("frank", passwordOf("frank")).wantRedirect("/")
		_, flash := admin.followToUsers(admin.post("/admin/users/"+id(u.ID)+"/delete", nil))
		if !strings.Contains(flash, "frank deleted") {
			t.Fatalf("flash %q", flash)
		}
		frank.get("/audit").wantRedirect("/login?expired=1&next=%2Faudit") // a session ended
		_, flash = admin.followToUsers(admin.post("/admin/users/"+id(u.ID)+"/delete", nil))
		if !strings.Contains(flash, "not found") {
			t.Fatalf("second delete: flash %q", flash)
		}
	})
	t.Run("TokensAreShownOnceAndRevoked", func(t *testing.T) {
		s := s.sub(t)
		u := s.addUser("gina", broker.RoleOperator)
		res := admin.post("/admin/tokens", url.Values{"user": {id(u.ID)}, "name": {"deploys"}})
		page, flash := admin.followToUsers(res)
		secret := page.testid("new-token-value")
		if !strings.HasPrefix(secret, broker.TokenPrefix) || !strings.Contains(flash, "deploys") {
			t.Fatalf("token %q, flash %q", secret, flash)
		}
		again := admin.get("/admin/users")
		if again.testid("new-token-value") != "" || strings.Contains(string(again.body), secret) {
			t.Fatal("the token is shown a second time")
		}
		row := again.doc().Find(`[data-testid="token-gina-deploys"]`)
		if row.Length() != 1 {
			t.Fatal("the token is not listed")
		}
		bearer := http.Header{"Authorization": {"Bearer " + secret}}
		s.request(s.ctx, "POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`, bearer).want(http.StatusCreated)

		action, _ := row.Find("form").Attr("action")
		admin.followToUsers(admin.post(action, nil))
		s.request(s.ctx, "GET", "/api/v1/dlq", "", bearer).wantError(http.StatusUnauthorized)
		if admin.get("/admin/users").doc().Find(`[data-testid="token-gina-deploys"]`).Length() != 0 {
			t.Fatal("a revoked token is listed")
		}
		entries, _ := s.broker.Audit(s.ctx, broker.AuditFilter{Action: broker.AuditToken}, broker.Page{})
		if len(entries) != 2 {
			t.Fatalf("token audit %+v", entries)
		}
	})
	t.Run("OnlyAdmins", func(t *testing.T) {
		s := s.sub(t)
		op, _ := s.loggedIn(broker.RoleOperator)
		page := op.get("/admin/users").want(http.StatusForbidden)
		if !strings.Contains(page.testid("error-page"), "admin role") {
			t.Fatalf("403 page says %q", page.testid("error-page"))
		}
		op.post("/admin/users", url.Values{"name": {"mallory"}, "role": {"admin"}, "password": {"long enough password"}}).want(http.StatusForbidden)
		if _, err := s.broker.UserByName(s.ctx, "mallory"); err == nil {
			t.Fatal("an operator created a user")
		}
		if strings.Contains(string(op.get("/audit").body), `href="/admin/users"`) {
			t.Fatal("an operator is shown the users link")
		}
	})
}

func TestCSRF(t *testing.T) {
	t.Parallel()
	s := setup(t)
	admin, _ := s.loggedIn(broker.RoleAdmin)
	create := func(name string) url.Values {
		return url.Values{"name": {name}, "role": {"viewer"}, "password": {"long enough password"}}
	}
	refused := func(t *testing.T, r response, name string) {
		t.Helper()
		r.want(http.StatusForbidden)
		if !strings.Contains(r.testid("error-page"), "nothing was changed") {
			t.Fatalf("refusal says %q", r.testid("error-page"))
		}
		if _, err := s.broker.UserByName(s.ctx, name); err == nil {
			t.Fatalf("%s was created", name)
		}
	}

	t.Run("AdminFormWithoutToken", func(t *testing.T) {
		refused(t, admin.postRaw("/admin/users", create("nt1"), nil), "nt1")
	})
	t.Run("AdminFormWithAWrongToken", func(t *testing.T) {
		f := create("nt2")
		f.Set("_csrf", "forged")
		refused(t, admin.postRaw("/admin/users", f, nil), "nt2")
	})
	t.Run("CrossSiteWithoutToken", func(t *testing.T) {
		refused(t, admin.postRaw("/admin/users", create("nt3"), http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}), "nt3")
	})
	t.Run("HtmxHeaderToken", func(t *testing.T) {
		r := admin.postRaw("/admin/users", create("ht1"), http.Header{"X-CSRF-Token": {admin.csrf()}})
		r.wantRedirect("/admin/users")
		if _, err := s.broker.UserByName(s.ctx, "ht1"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("HtmxRefusalGoesToTheFlash", func(t *testing.T) {
		r := admin.postRaw("/queues/q/dead-letters/1/replay", url.Values{}, http.Header{"HX-Request": {"true"}}).want(http.StatusForbidden)
		if r.header.Get("HX-Retarget") != "#flash" || !strings.Contains(r.testid("flash"), "Reload the page") {
			t.Fatalf("HX-Retarget %q, body %s", r.header.Get("HX-Retarget"), r.body)
		}
	})
	t.Run("LoginForm", func(t *testing.T) {
		s.addUser("lou", broker.RoleViewer)
		b := s.browser()
		b.postRaw("/login", url.Values{"name": {"lou"}, "password": {passwordOf("lou")}}, nil).want(http.StatusForbidden)
		if b.cookie("lazarus_session") != "" {
			t.Fatal("a login without CSRF token opened a session")
		}
	})
	t.Run("SameOriginBrowserRequests", func(t *testing.T) {
		// A browser that says the request comes from this very origin
		// (Sec-Fetch-Site, which pages cannot forge) needs no token.
		r := admin.postRaw("/admin/users", create("so1"), http.Header{"Sec-Fetch-Site": {"same-origin"}})
		r.wantRedirect("/admin/users")
	})
	t.Run("TheAPINeedsNoCSRFToken", func(t *testing.T) {
		s.call("POST", "/api/v1/push", `{"items":[{"queue":"q","payload":1}]}`).want(http.StatusCreated)
	})
}

func id(n int64) string { return strconv.FormatInt(n, 10) }
