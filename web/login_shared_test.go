package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Two servers over one store (two processes of one database behind a
// load balancer) share the counts of failed logins: failures on one
// slow down the other, by name and by address, and a burst spread over
// both gets one password check.
func TestLoginFailuresAreSharedByTheServersOfOneStore(t *testing.T) {
	t.Parallel()
	at := storeAt(t, "shared.db")
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	one, two := setupAt(t, at, c), setupAt(t, at, c)
	one.addUser("ann", broker.RoleViewer)
	one.addUser("bob", broker.RoleViewer)

	// A failure on one holds ann's name back on two, from anywhere, and
	// two's failure is the second in a row.
	one.browserFrom("127.0.5.1").login("ann", "wrong-password").want(http.StatusUnauthorized)
	if got := one.sleeps.take(); len(got) != 1 || got[0] != 250*time.Millisecond {
		t.Fatalf("the first failure waited %v, want 250ms", got)
	}
	r := two.browserFrom("127.0.5.2").login("ann", passwordOf("ann")).want(http.StatusTooManyRequests)
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q, want 1", r.header.Get("Retry-After"))
	}
	c.Advance(250 * time.Millisecond)
	two.browserFrom("127.0.5.2").login("ann", "wrong-password").want(http.StatusUnauthorized)
	if got := two.sleeps.take(); len(got) != 1 || got[0] != 500*time.Millisecond {
		t.Fatalf("the second failure, on the other server, waited %v, want 500ms", got)
	}
	// The address of two's failure is held back on one, for another name.
	one.browserFrom("127.0.5.2").login("bob", passwordOf("bob")).want(http.StatusTooManyRequests)
	// ann's success on one forgets her name's failures on two.
	c.Advance(500 * time.Millisecond)
	one.browserFrom("127.0.5.3").login("ann", passwordOf("ann")).wantRedirect("/")
	two.browserFrom("127.0.5.4").login("ann", "wrong-password").want(http.StatusUnauthorized)
	if got := two.sleeps.take(); len(got) != 1 || got[0] != 250*time.Millisecond {
		t.Fatalf("after ann's success, her failure waited %v, want 250ms (a fresh count)", got)
	}
	c.Advance(time.Minute)

	// Twenty wrong passwords for bob at once, from twenty addresses, half
	// to each server: one is checked, the others refused.
	h := holdChecks(t)
	one.server.OnPasswordCheck(h.hook)
	two.server.OnPasswordCheck(h.hook)
	const n = 20
	codes := make([]int, n)
	forms := make([]url.Values, n)
	browsers := make([]*browser, n)
	for i := range n {
		s := one
		if i%2 == 1 {
			s = two
		}
		browsers[i] = s.browserFrom(fmt.Sprintf("127.0.6.%d", i+1))
		forms[i] = url.Values{"name": {"bob"}, "password": {"wrong-" + fmt.Sprint(i)}, "_csrf": {browsers[i].csrf()}}
	}
	answered := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			codes[i] = browsers[i].postRaw("/login", forms[i], nil).status
			answered <- struct{}{}
		})
	}
	deadline := time.After(10 * time.Second)
	for got, in := 0, 0; got < n-1 || in < 1; {
		select {
		case <-answered:
			got++
		case <-h.entered:
			in++
		case <-deadline:
			t.Errorf("after 10 s, %d of %d attempts answered and %d checks started", got, n, in)
			got, in = n, 1
		}
	}
	h.open()
	wg.Wait()
	count := map[int]int{}
	for _, code := range codes {
		count[code]++
	}
	if count[http.StatusUnauthorized] != 1 || count[http.StatusTooManyRequests] != n-1 || h.n.Load() != 1 {
		t.Fatalf("answers %v and %d checks, want one 401, nineteen 429 and one check", count, h.n.Load())
	}
}

// A dashboard session made on one server of a store is good on the
// other (a load balancer need not be sticky), and a logout on either ends
// it on both.
func TestASessionIsSharedByTheServersOfOneStore(t *testing.T) {
	t.Parallel()
	at := storeAt(t, "sessions.db")
	c := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	one, two := setupAt(t, at, c), setupAt(t, at, c)
	one.addUser("ann", broker.RoleViewer)
	b := one.browser()
	b.login("ann", passwordOf("ann")).wantRedirect("/")
	b.get("/audit").want(http.StatusOK)
	b.s = two // the same browser, its cookies, at the other server
	b.get("/audit").want(http.StatusOK)
	b.postRaw("/logout", url.Values{"_csrf": {b.csrf()}}, nil).wantRedirect("/login")
	b.s = one
	b.get("/audit").wantRedirect("/login?next=%2Faudit")
}
