package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// syncBuffer is a log sink the tests read while the DB may write to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func openSpace(t *testing.T, path string, logs *syncBuffer) *Store {
	t.Helper()
	o := Options{Sync: SyncNormal, Exclusive: true}
	if logs != nil {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	// No background checkpointer: fileSize's TRUNCATE checkpoint would
	// find it copying (busy) now and then on a loaded machine.
	d, err := openWith(context.Background(), path, o, knobs{onlyCatchUp: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return d
}

func autoVacuum(t *testing.T, q interface {
	QueryRow(string, ...any) *sql.Row
}) int {
	t.Helper()
	var av int
	if err := q.QueryRow("PRAGMA auto_vacuum").Scan(&av); err != nil {
		t.Fatal(err)
	}
	return av
}

// pushSpace pushes n messages of size bytes to queue q, 500 a call.
func pushSpace(t *testing.T, b *broker.Broker, n, size int) {
	t.Helper()
	body := []byte(`"` + strings.Repeat("x", size-2) + `"`)
	for done := 0; done < n; {
		k := min(500, n-done)
		items := make([]broker.PushItem, k)
		for i := range items {
			items[i] = broker.PushItem{Queue: "q", Payload: body}
		}
		if _, err := b.Push(context.Background(), items); err != nil {
			t.Fatal(err)
		}
		done += k
	}
}

// fileSize is the database file's size once the log is copied back and
// emptied.
func fileSize(t *testing.T, d *Store) int64 {
	t.Helper()
	var busy, logPages, done int
	if err := d.write.QueryRow("PRAGMA main.wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &done); err != nil || busy != 0 {
		t.Fatalf("checkpoint: %v busy %d", err, busy)
	}
	st, err := os.Stat(d.path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestNewDatabaseGivesSpaceBack(t *testing.T) {
	d := openSpace(t, filepath.Join(t.TempDir(), "l.db"), nil)
	defer d.Close()
	if av := autoVacuum(t, d.write); av != autoVacuumIncremental {
		t.Fatalf("auto_vacuum = %d, want %d (INCREMENTAL)", av, autoVacuumIncremental)
	}
	s, err := broker.New(broker.Config{Store: d}).Space(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !s.Reclaims || s.PageSize != 4096 || s.Pages == 0 || s.Bytes() != s.Pages*4096 {
		t.Fatalf("space = %+v", s)
	}
}

// makeOld turns the database at path into one made before issue 16: no
// auto_vacuum.
func makeOld(t *testing.T, path string) {
	t.Helper()
	c, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Exec("PRAGMA auto_vacuum=NONE; VACUUM; PRAGMA main.wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	if av := autoVacuum(t, c); av != 0 {
		t.Fatalf("auto_vacuum = %d after making it old", av)
	}
}

func TestOldDatabaseIsConvertedOnceAndKeepsItsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	d := openSpace(t, path, nil)
	pushSpace(t, broker.New(broker.Config{Store: d}), 3000, 200)
	d.Close()
	makeOld(t, path)

	var logs syncBuffer
	d = openSpace(t, path, &logs)
	if av := autoVacuum(t, d.write); av != autoVacuumIncremental {
		t.Fatalf("auto_vacuum = %d after open, want it converted", av)
	}
	if !strings.Contains(logs.String(), "database converted") || !strings.Contains(logs.String(), "took=") {
		t.Fatalf("the conversion is not logged with its time:\n%s", logs.String())
	}
	var n, bad int
	if err := d.write.QueryRow(`SELECT COUNT(*), COUNT(*) FILTER (WHERE length(payload) != 200) FROM messages`).Scan(&n, &bad); err != nil || n != 3000 || bad != 0 {
		t.Fatalf("after converting: %d messages (%d changed), %v; want 3000 whole", n, bad, err)
	}
	res, err := broker.New(broker.Config{Store: d}).Pop(context.Background(), broker.PopRequest{Queue: "q", Batch: 1000})
	if err != nil || len(res.Messages) != 1000 {
		t.Fatalf("pop after converting: %d messages, %v", len(res.Messages), err)
	}
	d.Close()

	// Once: the next open finds it converted and says nothing.
	logs = syncBuffer{}
	d = openSpace(t, path, &logs)
	defer d.Close()
	if strings.Contains(logs.String(), "convert") {
		t.Fatalf("converted again:\n%s", logs.String())
	}
}

func TestConversionWaitsForRoom(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	d := openSpace(t, path, nil)
	pushSpace(t, broker.New(broker.Config{Store: d}), 1000, 200)
	d.Close()
	makeOld(t, path)

	old := freeBytes
	t.Cleanup(func() { freeBytes = old })
	freeBytes = func(string) (uint64, error) { return 1 << 20, nil } // 1 MiB free
	var logs syncBuffer
	d = openSpace(t, path, &logs)
	if av := autoVacuum(t, d.write); av != 0 {
		t.Fatalf("auto_vacuum = %d: converted without room", av)
	}
	if l := logs.String(); !strings.Contains(l, "not converted") || !strings.Contains(l, "need_bytes=") || !strings.Contains(l, "free_bytes=1048576") {
		t.Fatalf("the log does not say why, and what is needed:\n%s", l)
	}
	b := broker.New(broker.Config{Store: d})
	// It serves, and maintenance leaves its free pages to be reused.
	if _, err := d.write.Exec("DELETE FROM messages"); err != nil {
		t.Fatal(err)
	}
	rep, err := b.Maintain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskSpace); r.Removed != 0 || r.Chunks != 0 {
		t.Fatalf("space task on a database that cannot give back: %+v", r)
	}
	s, err := b.Space(context.Background())
	if err != nil || s.Reclaims || s.FreePages == 0 {
		t.Fatalf("space = %+v, %v", s, err)
	}
	d.Close()

	// With room, the next start converts it.
	freeBytes = old
	d = openSpace(t, path, nil)
	defer d.Close()
	if av := autoVacuum(t, d.write); av != autoVacuumIncremental {
		t.Fatalf("auto_vacuum = %d once there is room", av)
	}
}

func TestMaintenanceShrinksTheFileAfterABigDelete(t *testing.T) {
	ctx := context.Background()
	d := openSpace(t, filepath.Join(t.TempDir(), "l.db"), nil)
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	pushSpace(t, b, 40_000, 500)
	full := fileSize(t, d)
	// What message retention would delete (the oldest), deleted here by
	// hand: a big delete.
	if _, err := d.write.Exec("DELETE FROM messages WHERE seq <= (SELECT MAX(seq) - 1000 FROM messages)"); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, d); got != full {
		t.Fatalf("the delete alone changed the file: %d → %d", full, got)
	}
	before, err := b.Space(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := b.Maintain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Task(broker.TaskSpace)
	after, err := b.Space(ctx)
	if err != nil {
		t.Fatal(err)
	}
	small := fileSize(t, d)
	t.Logf("file %d KiB → %d KiB; free pages %d → %d; task %+v", full>>10, small>>10, before.FreePages, after.FreePages, r)
	if small > full/3 {
		t.Fatalf("file %d → %d bytes after maintenance: not given back", full, small)
	}
	if r.Removed != before.FreePages-after.FreePages || r.Removed == 0 {
		t.Fatalf("task reports %d pages given back, the freelist lost %d", r.Removed, before.FreePages-after.FreePages)
	}
	// In steps of SpaceStep pages a transaction.
	if want := int((r.Removed + broker.SpaceStep - 1) / broker.SpaceStep); r.Chunks != want {
		t.Fatalf("%d pages in %d transactions, want %d (steps of %d)", r.Removed, r.Chunks, want, broker.SpaceStep)
	}
	// The margin stays free for the next rows.
	if keep := max(broker.SpaceKeepPages, int64(float64(after.Pages)*broker.SpaceKeepFraction)); after.FreePages < keep-1 || after.FreePages > keep+int64(float64(before.Pages-after.Pages)*broker.SpaceKeepFraction)+1 {
		t.Fatalf("free pages left %d, want the margin (about %d)", after.FreePages, keep)
	}
	// Nothing more to give back: the next run writes nothing.
	rep, err = b.Maintain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Task(broker.TaskSpace); r.Chunks != 0 || r.Removed != 0 {
		t.Fatalf("second run: %+v", r)
	}
	// What is left is whole.
	var n int
	if err := d.write.QueryRow("SELECT COUNT(*) FROM messages").Scan(&n); err != nil || n != 1000 {
		t.Fatalf("%d messages left, %v; want 1000", n, err)
	}
	var ok string
	if err := d.write.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %s %v", ok, err)
	}
}

func TestSpaceBelowTheMarginIsKept(t *testing.T) {
	d := openSpace(t, filepath.Join(t.TempDir(), "l.db"), nil)
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	pushSpace(t, b, 2000, 400) // about 250 pages: less than SpaceKeepPages when freed
	if _, err := d.write.Exec("DELETE FROM messages"); err != nil {
		t.Fatal(err)
	}
	before, err := b.Space(context.Background())
	if err != nil || before.FreePages == 0 || before.FreePages > broker.SpaceKeepPages {
		t.Fatalf("space = %+v, %v", before, err)
	}
	rep, err := b.Maintain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	after, _ := b.Space(context.Background())
	if r := rep.Task(broker.TaskSpace); r.Removed != 0 || after.FreePages != before.FreePages {
		t.Fatalf("gave back %+v below the margin: free %d → %d", r, before.FreePages, after.FreePages)
	}
}

func TestGiveBackPagesFreesWhatItSays(t *testing.T) {
	ctx := context.Background()
	d := openSpace(t, filepath.Join(t.TempDir(), "l.db"), nil)
	defer d.Close()
	pushSpace(t, broker.New(broker.Config{Store: d}), 4000, 400)
	if _, err := d.write.Exec("DELETE FROM messages"); err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, n := range []int{0, 1, 7, 100} {
		if err := d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
			before, err := tx.Space(ctx)
			if err != nil {
				return err
			}
			freed, err := tx.GiveBackPages(ctx, n)
			if err != nil {
				return err
			}
			after, err := tx.Space(ctx)
			if err != nil {
				return err
			}
			if before.FreePages-after.FreePages != freed || before.Pages-after.Pages != freed {
				return fmt.Errorf("%d: freed %d, free %d → %d, pages %d → %d", n, freed, before.FreePages, after.FreePages, before.Pages, after.Pages)
			}
			got = append(got, freed)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[0 1 7 100]" {
		t.Fatalf("gave back %v, want [0 1 7 100]", got)
	}
}

// handClock is a clock the test moves.
type handClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *handClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *handClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestRetentionThenSpaceShrinkTheFile: completedRetentionSeconds deletes
// what every group settled, and the same maintenance run gives the pages
// back: the file shrinks with no hand-made delete.
func TestRetentionThenSpaceShrinkTheFile(t *testing.T) {
	ctx := context.Background()
	d := openSpace(t, filepath.Join(t.TempDir(), "l.db"), nil)
	defer d.Close()
	clock := &handClock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	b := broker.New(broker.Config{Store: d, Clock: clock})
	if _, err := b.Configure(ctx, "q", map[string]json.RawMessage{"completedRetentionSeconds": json.RawMessage("60")}, "test"); err != nil {
		t.Fatal(err)
	}
	pushSpace(t, b, 40_000, 500)
	for done := 0; done < 40_000; {
		res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Batch: 1000})
		if err != nil || len(res.Messages) == 0 {
			t.Fatalf("pop: %d, %v", len(res.Messages), err)
		}
		acks := make([]broker.Ack, len(res.Messages))
		for i, m := range res.Messages {
			acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted}
		}
		if _, err := b.AckBatch(ctx, "", acks); err != nil {
			t.Fatal(err)
		}
		done += len(acks)
	}
	full := fileSize(t, d)
	if _, err := b.Maintain(ctx); err != nil { // notes what is settled
		t.Fatal(err)
	}
	clock.advance(61 * time.Second)
	rep, err := b.Maintain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	small := fileSize(t, d)
	t.Logf("file %d KiB → %d KiB; %+v; %+v", full>>10, small>>10, rep.Task(broker.TaskMessages), rep.Task(broker.TaskSpace))
	if m := rep.Task(broker.TaskMessages); m.Removed != 40_000 {
		t.Fatalf("retention removed %d messages, want 40000", m.Removed)
	}
	if s := rep.Task(broker.TaskSpace); s.Removed == 0 || small > full/3 {
		t.Fatalf("file %d → %d bytes, %d pages given back: not shrunk", full, small, s.Removed)
	}
}

func TestKeepAutoVacuumLeavesTheFileAsItIs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	d, err := OpenWith(context.Background(), path, Options{Sync: SyncNormal, KeepAutoVacuum: true})
	if err != nil {
		t.Fatal(err)
	}
	if av := autoVacuum(t, d.write); av != 0 {
		t.Fatalf("new database: auto_vacuum = %d, want 0 with KeepAutoVacuum", av)
	}
	d.Close()
	d, err = OpenWith(context.Background(), path, Options{Sync: SyncNormal, KeepAutoVacuum: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if av := autoVacuum(t, d.write); av != 0 {
		t.Fatalf("reopened: auto_vacuum = %d, want it left at 0", av)
	}
}

// TestConversionThatRunsOutOfSpaceServes: when the disk fills up during
// the copy (here a file size limit, which SQLite meets as EFBIG), the
// VACUUM rolls back and the database opens as it was.
func TestConversionThatRunsOutOfSpaceServes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	d := openSpace(t, path, nil)
	pushSpace(t, broker.New(broker.Config{Store: d}), 3000, 200)
	d.Close()
	makeOld(t, path)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	// Not parallel: the limit is the process's. Writes past it fail with
	// EFBIG instead of a signal.
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.SIGXFSZ)
	defer signal.Reset(syscall.SIGXFSZ)
	limit := syscall.Rlimit{Cur: uint64(st.Size() / 2), Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Skipf("cannot limit the file size: %v", err)
	}
	var logs syncBuffer
	d, err = OpenWith(context.Background(), path, Options{Sync: SyncNormal, Exclusive: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("open failed when the conversion ran out of space: %v", err)
	}
	defer d.Close()
	if av := autoVacuum(t, d.write); av != 0 {
		t.Fatalf("auto_vacuum = %d", av)
	}
	if l := logs.String(); !strings.Contains(l, "not converted") || !strings.Contains(l, "filled up") {
		t.Fatalf("the log does not say why:\n%s", l)
	}
	var n int
	if err := d.write.QueryRow(`SELECT COUNT(*) FROM messages`).Scan(&n); err != nil || n != 3000 {
		t.Fatalf("%d messages, %v; want 3000", n, err)
	}
}

// Connecting writes nothing: a database that gives space back already is
// not written when the writer's pool opens another connection (PRAGMA
// auto_vacuum set at connect would write the file's header each time: a
// commit that other connections see as a change).
func TestConnectingWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	for range 2 { // made, then opened again
		d, err := Open(ctx, path, SyncNormal)
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	d, err := Open(ctx, path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rdb, err := sql.Open(DriverName, "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	watch, err := rdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	version := func() (v int64) {
		t.Helper()
		if err := watch.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := version()
	// The pool's spare connection (the other is held for the writes),
	// new each time: none is kept idle.
	w := d.WriteDB()
	w.SetMaxIdleConns(0)
	for range 3 {
		c, err := w.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecContext(ctx, `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if after := version(); after != before {
		t.Fatalf("data_version went from %d to %d: opening connections wrote the database", before, after)
	}
	var av int
	if err := watch.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&av); err != nil || av != autoVacuumIncremental {
		t.Fatalf("auto_vacuum = %d (%v), want %d", av, err, autoVacuumIncremental)
	}
}

// Only the process that holds the database converts it: a command run
// beside the server (not Exclusive) leaves an old database as it is.
func TestOnlyTheHolderConverts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	autoVacuum := func(o Options) int {
		t.Helper()
		d, err := OpenWith(ctx, path, o)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var av int
		if err := d.WriteDB().QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&av); err != nil {
			t.Fatal(err)
		}
		return av
	}
	if av := autoVacuum(Options{Sync: SyncNormal, KeepAutoVacuum: true}); av != 0 {
		t.Fatalf("made without: auto_vacuum = %d", av)
	}
	if av := autoVacuum(Options{Sync: SyncNormal}); av != 0 {
		t.Fatalf("opened beside (not exclusive): auto_vacuum = %d, want it left at 0", av)
	}
	if av := autoVacuum(Options{Sync: SyncNormal, Exclusive: true}); av != autoVacuumIncremental {
		t.Fatalf("opened by its holder: auto_vacuum = %d, want %d", av, autoVacuumIncremental)
	}
}
