package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/sqlite"
)

// holdWriteLock takes the write lock of the database at path from another
// connection, as another process would (a backup, the sqlite3 shell), and
// returns the function that releases it.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	other, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("BEGIN IMMEDIATE: %v", err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Errorf("ROLLBACK: %v", err)
			}
			conn.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// While another process holds the write lock, every write fails with
// broker.ErrUnavailable after about the busy timeout, however many were
// waiting (group commit: one busy BEGIN fails its group and the writes
// queued behind it), nothing of them is committed, and reads go on.
func TestBusyDatabaseRefusesWritesInBoundedTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	const busy = 2 * time.Second
	d, err := sqlite.OpenWith(ctx, path, sqlite.Options{Sync: sqlite.SyncNormal, BusyTimeout: busy})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	if _, err := b.Push(ctx, []broker.PushItem{{Queue: "q", TransactionID: "before", Payload: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}

	release := holdWriteLock(t, path)
	const writers = 12
	type outcome struct {
		err  error
		took time.Duration
	}
	out := make(chan outcome, writers)
	start := time.Now()
	for i := range writers {
		go func() {
			t0 := time.Now()
			_, err := b.Push(ctx, []broker.PushItem{{Queue: "q", TransactionID: fmt.Sprintf("during-%d", i), Payload: []byte(`2`)}})
			out <- outcome{err, time.Since(t0)}
		}()
		if i == 0 {
			sqlite.WaitWriting(d) // the first is being written when the others come
		}
	}
	// Reads are not held up meanwhile (WAL).
	t0 := time.Now()
	q, err := b.Queue(ctx, "q")
	if err != nil || len(q.Partitions) != 1 || q.Partitions[0].Messages != 1 {
		t.Fatalf("read while locked: %+v %v", q, err)
	}
	if took := time.Since(t0); took >= busy {
		t.Errorf("a read took %s while the write lock was held: it waited for the lock", took)
	}
	for range writers {
		o := <-out
		if !errors.Is(o.err, broker.ErrUnavailable) {
			t.Errorf("a write while locked returned %v, want broker.ErrUnavailable", o.err)
		}
		// Each waited one busy timeout, not one per group ahead of it
		// (two groups would be 2*busy; the margin between is for a
		// loaded machine).
		if o.took > busy*3/2 {
			t.Errorf("a write was refused after %s, want about the busy timeout (%s)", o.took, busy)
		}
	}
	t.Logf("%d writes refused within %s of the first", writers, time.Since(start))
	release()

	// Nothing of the refused writes was committed; writes work again.
	if _, err := b.Push(ctx, []broker.PushItem{{Queue: "q", TransactionID: "after", Payload: []byte(`3`)}}); err != nil {
		t.Fatalf("push after the lock was released: %v", err)
	}
	q, err = b.Queue(ctx, "q")
	if err != nil || q.Partitions[0].Messages != 2 {
		t.Fatalf("after: %d messages (%v), want 2: before and after", q.Partitions[0].Messages, err)
	}
}

// A database that another process keeps locked at start is a clear error,
// after the busy timeout.
func TestOpenLockedDatabaseSaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	d, err := sqlite.Open(ctx, path, sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	holdWriteLock(t, path)
	_, err = sqlite.OpenWith(ctx, path, sqlite.Options{BusyTimeout: 100 * time.Millisecond})
	if err == nil || !errors.Is(err, broker.ErrUnavailable) {
		t.Fatalf("open while locked: %v, want broker.ErrUnavailable", err)
	}
	if want := "another process holds a lock on it"; !strings.Contains(err.Error(), want) {
		t.Fatalf("open while locked: %q, want it to say %q", err, want)
	}
}
