package pgtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// CommitCutter is a TCP relay between a client and the server of a
// database that cuts a connection (both sides) once a COMMIT it was armed
// for has gone by to the server: the server commits, the client never
// hears of it, as when the network or the server drops the connection at
// that moment. It reads PostgreSQL's frontend protocol (simple and
// extended queries, statements prepared once and bound later).
type CommitCutter struct {
	// URL is the database's URL through the relay.
	URL string

	target  func() (net.Conn, error)
	marker  atomic.Pointer[string]
	before  atomic.Pointer[string]
	left    atomic.Int64 // cuts before the statement ArmBefore names still to make
	cuts    atomic.Int64
	ln      net.Listener
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	stopped bool
}

// CutCommits starts a relay to the database at dsn (a URL of Database),
// stopped when t ends.
func CutCommits(t testing.TB, dsn string) *CommitCutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return Relay(t, dsn, ln)
}

// Relay is CutCommits on a listener of the caller's: one opened late on
// an address a client already tries.
func Relay(t testing.TB, dsn string, ln net.Listener) *CommitCutter {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, addr := "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("host")
	q.Set("sslmode", "disable")
	u.Host, u.RawQuery = ln.Addr().String(), q.Encode()
	c := &CommitCutter{URL: u.String(), ln: ln, conns: map[net.Conn]struct{}{},
		target: func() (net.Conn, error) { return net.Dial(network, addr) }}
	go c.accept()
	t.Cleanup(c.stop)
	return c
}

// Arm makes the relay cut the connection of the next transaction that
// ran a statement whose text holds marker, once its COMMIT has been
// passed on; one cut, then it is disarmed.
func (c *CommitCutter) Arm(marker string) { c.marker.Store(&marker) }

// ArmBefore makes the relay cut the connection that sends a statement
// whose text holds marker, before the statement is passed on: the
// connection breaks in the middle of its transaction, which the server
// rolls back (nothing of it is committed). One cut, then it is disarmed.
func (c *CommitCutter) ArmBefore(marker string) { c.ArmBeforeTimes(marker, 1) }

// ArmBeforeTimes is ArmBefore for the next n statements that hold marker
// (a write that runs again on another connection meets the relay again).
func (c *CommitCutter) ArmBeforeTimes(marker string, n int64) {
	c.left.Store(n)
	c.before.Store(&marker)
}

// Cuts is how many connections the relay cut.
func (c *CommitCutter) Cuts() int64 { return c.cuts.Load() }

func (c *CommitCutter) stop() {
	c.mu.Lock()
	c.stopped = true
	for conn := range c.conns {
		conn.Close()
	}
	c.mu.Unlock()
	c.ln.Close()
}

func (c *CommitCutter) track(conns ...net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	for _, conn := range conns {
		c.conns[conn] = struct{}{}
	}
	return true
}

func (c *CommitCutter) accept() {
	for {
		client, err := c.ln.Accept()
		if err != nil {
			return
		}
		server, err := c.target()
		if err != nil {
			client.Close()
			continue
		}
		if !c.track(client, server) {
			client.Close()
			server.Close()
			return
		}
		var muted atomic.Bool
		go answer(client, server, &muted)
		go c.relay(client, server, &muted)
	}
}

// answer passes the server's answers on to the client until muted: once
// relay has decided to cut, nothing the server says reaches the client
// (muted is set before the COMMIT is passed on, and looked at after each
// read, so its answer can never slip through ahead of the cut).
func answer(client, server net.Conn, muted *atomic.Bool) {
	defer client.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if muted.Load() {
			return
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// relay passes the client's messages on to the server one by one,
// watching for the COMMIT of a transaction that ran the armed marker.
func (c *CommitCutter) relay(client, server net.Conn, muted *atomic.Bool) {
	defer client.Close()
	defer server.Close()
	pass := func(b []byte) bool { _, err := server.Write(b); return err == nil }
	// The startup: untyped messages (an SSL or GSS request first, maybe).
	for {
		head := make([]byte, 8)
		if _, err := io.ReadFull(client, head); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(head))
		if n < 8 || n > 1<<20 {
			return
		}
		rest := make([]byte, n-8)
		if _, err := io.ReadFull(client, rest); err != nil || !pass(append(head, rest...)) {
			return
		}
		if code := binary.BigEndian.Uint32(head[4:]); code != 80877103 && code != 80877104 {
			break
		}
	}
	statements := map[string]string{} // prepared: name → text
	marked, committing := false, false
	for {
		head := make([]byte, 5)
		if _, err := io.ReadFull(client, head); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(head[1:]))
		if n < 4 {
			return
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(client, body); err != nil {
			return
		}
		armed := c.marker.Load()
		before := c.before.Load()
		cutNow := false
		ran := func(text string) {
			if before != nil && strings.Contains(text, *before) {
				cutNow = true
			}
			switch {
			case armed != nil && strings.Contains(text, *armed):
				marked = true
			case strings.TrimSpace(strings.ToUpper(text)) == "COMMIT":
				committing = marked
			case strings.HasPrefix(strings.ToUpper(text), "ROLLBACK"):
				marked = false
			}
		}
		cut := false
		switch head[0] {
		case 'Q': // a simple query: its text, run at once
			ran(cstring(body))
			cut = committing
		case 'P': // Parse: name, text
			name := cstring(body)
			statements[name] = cstring(body[len(name)+1:])
		case 'B': // Bind: portal, statement
			portal := cstring(body)
			ran(statements[cstring(body[len(portal)+1:])])
		case 'S': // Sync: what was sent runs now
			cut = committing
		}
		if cutNow && c.left.Add(-1) >= 0 {
			if c.left.Load() <= 0 {
				c.before.CompareAndSwap(before, nil)
			}
			muted.Store(true)
			c.cuts.Add(1)
			return // the deferred closes cut both sides; the statement never went
		}
		if cut && armed != nil && c.marker.CompareAndSwap(armed, nil) {
			muted.Store(true) // before the COMMIT goes: its answer must not
			pass(append(head, body...))
			c.cuts.Add(1)
			return // the deferred closes cut both sides
		}
		if !pass(append(head, body...)) {
			return
		}
		if cut {
			marked, committing = false, false
		}
	}
}

// cstring is b up to its first NUL.
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}
