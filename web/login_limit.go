package web

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/lazarus-dlq/lazarus/password"
)

// Login slowdown: every failed login of a client address or a user name
// doubles the time before the next attempt with that address or name is
// heard, from loginFirstDelay up to loginMaxDelay. The failed attempt's
// answer itself waits that long, so a person who mistypes never notices;
// a script that does not wait is refused (429) without its password being
// checked. An attempt is counted when it is let in, before its password
// is checked, so that attempts sent at the same time are not all checked:
// of a burst for one name or from one address, one is checked and the
// others are refused. A success forgets the name's failures, not the
// address's (a user who logs in to an account of their own must not clear
// the count of the names they tried); failures are forgotten after
// broker.LoginForget (15 minutes).
//
// The counts live in the store (broker.BeginLogin, EndLogin), so that
// every process of one database sees the same ones: behind a load
// balancer, an attacker gets no fresh count from another process. The
// store keeps at most broker.LoginMaxKeys keys, whatever a flood of
// made-up names makes, and the maintenance removes the forgotten ones.
//
// Apart from that, at most Config.MaxLoginChecks passwords are checked
// at once (bcrypt takes a core for a quarter of a second): an attempt
// past that is refused (429) at once, and not counted. That bound is
// this process's: it keeps this process's cores.
const (
	loginFirstDelay = 250 * time.Millisecond
	loginMaxDelay   = 8 * time.Second
)

// loginDelay is the wait that n failures in a row earn.
func loginDelay(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := loginFirstDelay
	for i := 1; i < n && d < loginMaxDelay; i++ {
		d *= 2
	}
	return min(d, loginMaxDelay)
}

// loginKeys are the keys of an attempt: its client address and the user
// name it tries, in that order.
func loginKeys(ip, name string) []string {
	return []string{"ip:" + ip, "name:" + strings.ToLower(name)}
}

// checkSlots bounds the password checks that run at once.
type checkSlots chan struct{}

// take takes a slot if one is free, without waiting.
func (s checkSlots) take() bool {
	select {
	case s <- struct{}{}:
		return true
	default:
		return false
	}
}

// give gives a slot back.
func (s checkSlots) give() { <-s }

// clientIP is the address the request came from: the peer, never a header
// the client could set. Behind a reverse proxy every client shares the
// proxy's address, and the per-name limit does the work.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// dummyHash is a bcrypt hash of a random password at the server's cost:
// logins of unknown users are checked against it, so that they take as long
// as those of known users and do not tell which names exist.
type dummyHash struct {
	cost int
	once sync.Once
	hash string
}

func (d *dummyHash) get() string {
	d.once.Do(func() {
		pw, err := password.Generate()
		if err == nil {
			d.hash, _ = password.Hash(pw, d.cost)
		}
	})
	return d.hash
}
