package web_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/web"
)

// browserFrom is a new visitor whose requests come from ip, an address of
// the loopback network (127.0.0.0/8): the server tells clients apart by
// their address.
func (s *bundle) browserFrom(ip string) *browser {
	s.t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		s.t.Fatal(err)
	}
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &browser{s: s, client: &http.Client{
		Jar:           jar,
		Transport:     &http.Transport{DialContext: dialer.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// heldChecks holds every password check of a server until release: a
// test sees which attempts reached a check while the first ones are
// still in it.
type heldChecks struct {
	entered chan struct{} // one value per check that started
	release chan struct{}
	once    sync.Once
	n       atomic.Int64
}

func holdChecks(t *testing.T) *heldChecks {
	h := &heldChecks{entered: make(chan struct{}, 1000), release: make(chan struct{})}
	t.Cleanup(h.open)
	return h
}

func (h *heldChecks) hook() {
	h.n.Add(1)
	h.entered <- struct{}{}
	<-h.release
}

func (h *heldChecks) open() { h.once.Do(func() { close(h.release) }) }

// burst sends n logins at once, the i-th from from(i) as name(i) with a
// wrong password, and returns the answers. Checks are held (h) until all
// the answers but those of the held checks have come, or a deadline
// passes: attempts that should have been refused without a check would
// otherwise wait in the check too.
func burst(t *testing.T, s *bundle, h *heldChecks, n int, from func(i int) string, name func(i int) string, held int) []response {
	t.Helper()
	browsers := make([]*browser, n)
	forms := make([]url.Values, n)
	for i := range n {
		browsers[i] = s.browserFrom(from(i))
		forms[i] = url.Values{"name": {name(i)}, "password": {"wrong-password-" + fmt.Sprint(i)}, "_csrf": {browsers[i].csrf()}}
	}
	out := make([]response, n)
	answered := make(chan int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = browsers[i].postRaw("/login", forms[i], nil)
			answered <- i
		})
	}
	close(start)
	// Wait for the held checks to start and every other attempt to be
	// answered, then let the checks finish.
	deadline := time.After(10 * time.Second)
	for got, in := 0, 0; got < n-held || in < held; {
		select {
		case <-answered:
			got++
		case <-h.entered:
			in++
		case <-deadline:
			t.Errorf("after 10 s, %d of %d attempts answered and %d checks started, want %d answered while %d are checked", got, n, in, n-held, held)
			got, in = n, held
		}
	}
	h.open()
	wg.Wait()
	return out
}

// statuses counts the answers by status, and checks that each 429 says
// when to come back.
func statuses(t *testing.T, rs []response) map[int]int {
	t.Helper()
	n := map[int]int{}
	for _, r := range rs {
		n[r.status]++
		if r.status == http.StatusTooManyRequests && r.header.Get("Retry-After") == "" {
			t.Errorf("a 429 without Retry-After: %s", r.body)
		}
	}
	return n
}

// 20 wrong passwords for one user sent at once, from one address or from
// twenty, get one password check: each attempt is counted before it is
// checked, so the others are refused while the first is being checked.
func TestConcurrentWrongPasswordsGetOneCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		from func(i int) string
	}{
		{"OneAddress", func(int) string { return "127.0.0.1" }},
		{"TwentyAddresses", func(i int) string { return fmt.Sprintf("127.0.1.%d", i+1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := holdChecks(t)
			s := setup(t)
			s.server.OnPasswordCheck(h.hook)
			s.addUser("ann", broker.RoleOperator)
			rs := burst(t, s, h, 20, tc.from, func(int) string { return "ann" }, 1)
			if got := statuses(t, rs); got[http.StatusUnauthorized] != 1 || got[http.StatusTooManyRequests] != 19 {
				t.Fatalf("answers %v, want one 401 and nineteen 429", got)
			}
			if n := h.n.Load(); n != 1 {
				t.Fatalf("%d passwords checked, want 1", n)
			}
		})
	}
}

// At most MaxLoginChecks passwords are checked at once, whoever tries:
// an attempt past it is refused at once (429, Retry-After) and does not
// count as a failure.
func TestPasswordChecksAreBounded(t *testing.T) {
	t.Parallel()
	h := holdChecks(t)
	s := setup(t, func(c *web.Config) { c.MaxLoginChecks = 2 })
	s.server.OnPasswordCheck(h.hook)
	const n = 12
	for i := range n {
		s.addUser(fmt.Sprintf("user%d", i), broker.RoleViewer)
	}
	from := func(i int) string { return fmt.Sprintf("127.0.2.%d", i+1) }
	rs := burst(t, s, h, n, from, func(i int) string { return fmt.Sprintf("user%d", i) }, 2)
	got := statuses(t, rs)
	if got[http.StatusUnauthorized] != 2 || got[http.StatusTooManyRequests] != n-2 {
		t.Fatalf("answers %v, want two 401 and %d 429", got, n-2)
	}
	if c := h.n.Load(); c != 2 {
		t.Fatalf("%d passwords checked, want 2", c)
	}
	var refused []int
	for i, r := range rs {
		if r.status == http.StatusTooManyRequests {
			if !strings.Contains(r.testid("login-error"), "Too many logins at once") {
				t.Errorf("refusal says %q", r.testid("login-error"))
			}
			refused = append(refused, i)
		}
	}
	// The refused were not counted: each gets in at once with its
	// password, from its address.
	for _, i := range refused {
		name := fmt.Sprintf("user%d", i)
		s.browserFrom(from(i)).login(name, passwordOf(name)).wantRedirect("/")
	}
}

// A success forgets the user's failures, not the address's: one who logs
// in to an account of their own does not clear the count of the names
// they tried from there.
func TestLoginSuccessResetsTheUserNotTheAddress(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.addUser("ann", broker.RoleViewer)
	s.addUser("mallory", broker.RoleViewer)
	here := s.browserFrom("127.0.3.1")
	for i, name := range []string{"ann", "bob", "carol"} {
		here.login(name, "guess-"+name).want(http.StatusUnauthorized)
		s.clock.Advance(time.Duration(250<<i) * time.Millisecond)
	}
	s.sleeps.take()
	// mallory logs in from the same address; the address's three failures
	// stay, but her success sets no wait: the next attempt from there is
	// heard at once, and its failure waits as the fourth.
	here.login("mallory", passwordOf("mallory")).wantRedirect("/")
	s.browserFrom("127.0.3.1").login("dave", "guess-dave").want(http.StatusUnauthorized)
	if got := s.sleeps.take(); len(got) != 1 || got[0] != 2*time.Second {
		t.Fatalf("the fourth failure from the address waited %v, want 2s", got)
	}
	// ann's own failure is forgotten by her success, from anywhere.
	s.clock.Advance(time.Minute)
	s.browserFrom("127.0.3.2").login("ann", "guess-again").want(http.StatusUnauthorized)
	s.clock.Advance(time.Second)
	s.browserFrom("127.0.3.3").login("ann", passwordOf("ann")).wantRedirect("/")
	s.sleeps.take()
	s.browserFrom("127.0.3.4").login("ann", "guess-again").want(http.StatusUnauthorized)
	if got := s.sleeps.take(); len(got) != 1 || got[0] != 250*time.Millisecond {
		t.Fatalf("after ann's success, her failure waited %v, want 250ms (a fresh count)", got)
	}
}

// A success delays no one: after failures from an address, users who log
// in from it one after another, with no time passing, are each let in
// (failures alone set the wait).
func TestLoginSuccessDelaysNoOne(t *testing.T) {
	t.Parallel()
	s := setup(t)
	here := s.browserFrom("127.0.3.9")
	for i, name := range []string{"ann", "bob", "carol"} {
		here.login(name, "guess-"+name).want(http.StatusUnauthorized)
		s.clock.Advance(time.Duration(250<<i) * time.Millisecond)
	}
	for _, name := range []string{"dora", "emil", "fay", "gus"} {
		s.addUser(name, broker.RoleViewer)
		s.browserFrom("127.0.3.9").login(name, passwordOf(name)).wantRedirect("/")
	}
	s.sleeps.take()
	s.browserFrom("127.0.3.9").login("hal", "guess-hal").want(http.StatusUnauthorized)
	if got := s.sleeps.take(); len(got) != 1 || got[0] != 2*time.Second {
		t.Fatalf("the fourth failure from the address waited %v, want 2s", got)
	}
}
