package postgres

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// logBuffer is a log a test reads while the code under test writes it,
// telling a waiter each time a record holds a text.
type logBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan struct{}
	text string
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if strings.Contains(string(p), b.text) {
		select {
		case b.seen <- struct{}{}:
		default:
		}
	}
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Open waits for a PostgreSQL server that cannot be reached yet (as at
// boot, when Lazarus starts before it), trying again and logging each
// try without the password, and opens it once it answers.
func TestOpenWaitsForAServerThatIsNotUpYet(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Database(t, "db", Prepare)
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close() // nothing listens there: connections are refused
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	password, ok := u.User.Password()
	if !ok {
		password = "s3cret-pw" // the throwaway cluster trusts its users
		u.User = url.UserPassword(u.User.Username(), password)
	}
	q := u.Query()
	q.Del("host")
	q.Set("sslmode", "disable")
	u.Host, u.RawQuery = addr, q.Encode()

	logs := &logBuffer{seen: make(chan struct{}, 1), text: "PostgreSQL not reachable yet"}
	opened := make(chan error, 1)
	go func() {
		d, err := OpenWith(context.Background(), u.String(), Options{Sync: SyncNormal, Wait: time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err == nil {
			err = d.Close()
		}
		opened <- err
	}()
	for range 2 { // two failed tries, then the server comes up
		select {
		case <-logs.seen:
		case err := <-opened:
			t.Fatalf("Open returned before the server was up: %v\n%s", err, logs)
		case <-time.After(30 * time.Second):
			t.Fatalf("no try logged\n%s", logs)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s again: %v", addr, err)
	}
	pgtest.Relay(t, dsn, ln)
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("Open once the server was up: %v\n%s", err, logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Open did not return within 30s of the server coming up\n%s", logs)
	}
	if strings.Contains(logs.String(), password) || !strings.Contains(logs.String(), "PostgreSQL reached") {
		t.Fatalf("logs show the password, or not that the server was reached:\n%s", logs)
	}
}

// The wait is bounded: a server that never comes up fails Open once the
// wait is over, saying how long it tried.
func TestOpenWaitsNoLongerThanItsWait(t *testing.T) {
	t.Parallel()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	start := time.Now()
	_, err = OpenWith(context.Background(), "postgres://lz@"+addr+"/lazarus?sslmode=disable", Options{Sync: SyncNormal, Wait: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "not reached in") {
		t.Fatalf("open: %v, want an error saying it was not reached", err)
	}
	if took := time.Since(start); took < time.Second || took > 10*time.Second {
		t.Fatalf("gave up after %s, want about the 1s wait", took)
	}
}

// A server that goes away while Open migrates the schema (it crashed, or
// the network cut the connection) is waited for as one not up yet:
// Open migrates again and opens it, within its wait; with no wait it
// fails as before. The fault campaign (faults/) found a process
// restarted while PostgreSQL crashed ending with "migrate: unexpected
// EOF" in spite of its --db-wait.
func TestOpenMigratesAgainWhenTheServerGoesAwayMeanwhile(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Database(t, "db", Prepare)
	relay := pgtest.CutCommits(t, dsn)
	// The statement that asks whether a migration is recorded: the
	// connection breaks in the middle of the migration.
	const marker = "FROM schema_migrations WHERE version"
	relay.ArmBefore(marker)
	_, err := OpenWith(context.Background(), relay.URL, Options{Sync: SyncNormal, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !errors.Is(unavailable(err), broker.ErrUnavailable) || relay.Cuts() != 1 {
		t.Fatalf("open with no wait, its migration cut: %v (cuts %d), want the break", err, relay.Cuts())
	}
	relay.ArmBeforeTimes(marker, 2)
	logs := &logBuffer{seen: make(chan struct{}, 1), text: "trying again"}
	d, err := OpenWith(context.Background(), relay.URL, Options{Sync: SyncNormal, Wait: time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("open with a wait, its migration cut twice: %v\n%s", err, logs)
	}
	defer d.Close()
	if relay.Cuts() != 3 || !strings.Contains(logs.String(), "PostgreSQL went away during the migration") {
		t.Fatalf("cuts %d, want 3; logs:\n%s", relay.Cuts(), logs)
	}
	if err := d.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
}
