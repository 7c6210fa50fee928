package db_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

func TestOpenMigratesOnceAndKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	d, err := db.Open(ctx, path, db.SyncFull)
	if err != nil {
		t.Fatal(err)
	}
	if d.Postgres() {
		t.Fatal("a file opened as PostgreSQL")
	}
	b := broker.New(broker.Config{Store: d})
	res, err := b.Push(ctx, []broker.PushItem{{Queue: "q", Payload: []byte(`{"keep": [1, 2.50, "x"]}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// Opening again applies no migration twice and finds the message as pushed.
	d, err = db.Open(ctx, path, db.SyncNormal)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer d.Close()
	files, err := os.ReadDir(filepath.Join("sqlite", "migrations")) // the SQLite store's
	if err != nil {
		t.Fatal(err)
	}
	var migrations int
	if err := d.WriteDB().QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&migrations); err != nil || migrations != len(files) {
		t.Fatalf("schema_migrations: %d rows for %d files (%v)", migrations, len(files), err)
	}
	got, err := broker.New(broker.Config{Store: d}).Pop(ctx, broker.PopRequest{Queue: "q"})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("pop after reopen: %+v %v", got, err)
	}
	if m := got.Messages[0]; m.ID() != res[0].MessageID || string(m.Payload) != `{"keep": [1, 2.50, "x"]}` {
		t.Fatalf("message changed: %s %q", m.ID(), m.Payload)
	}
}

func TestOpenRejectsUnknownSync(t *testing.T) {
	t.Parallel()
	if _, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "l.db"), db.Sync("OFF")); err == nil {
		t.Fatal("synchronous=OFF accepted")
	}
}

func TestReadPoolCannotWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(t.TempDir(), "l.db"), db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.View(ctx, func(tx broker.Tx) error {
		return tx.SetSetting(ctx, "k", "v")
	})
	if err == nil {
		t.Fatal("a write went through a read transaction")
	}
}

// Concurrent updates are committed in groups; one that fails leaves
// nothing behind and does not undo the others.
func TestGroupCommitKeepsEachUpdateAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(t.TempDir(), "l.db"), db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const n = 200
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			errs <- d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error {
				if err := tx.SetSetting(ctx, fmt.Sprintf("k%d", i), "v"); err != nil {
					return err
				}
				switch i % 10 {
				case 3:
					return errors.New("refused after writing")
				case 7:
					panic("a bug after writing")
				}
				return nil
			})
		}(i)
	}
	failed := 0
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			failed++
		}
	}
	if failed != n/5 {
		t.Fatalf("%d updates failed, want %d", failed, n/5)
	}
	for i := 0; i < n; i++ {
		var v string
		err := d.View(ctx, func(tx broker.Tx) (err error) {
			v, err = tx.Setting(ctx, fmt.Sprintf("k%d", i))
			return err
		})
		kept := err == nil && v == "v"
		if want := i%10 != 3 && i%10 != 7; kept != want {
			t.Fatalf("k%d kept %v, want %v (%v)", i, kept, want, err)
		}
	}
}

func TestUpdateAfterCloseFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(t.TempDir(), "l.db"), db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Update(ctx, broker.UpdateOptions{}, func(broker.Tx) error { return nil }); !errors.Is(err, db.ErrClosed) {
		t.Fatalf("update after close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// Writes in flight when Close is called either commit (and are there
// after reopening) or fail with ErrClosed (and are not): none hangs and
// none is half done.
func TestCloseDuringWritesLosesNoAnsweredWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	d, err := db.Open(ctx, path, db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	type outcome struct {
		key string
		err error
	}
	out := make(chan outcome, n)
	write := func(i int) {
		var o broker.UpdateOptions
		if i%4 == 0 {
			o.Background = true
		}
		key := fmt.Sprintf("k%d", i)
		out <- outcome{key, d.Update(ctx, o, func(tx broker.Tx) error { return tx.SetSetting(ctx, key, "v") })}
	}
	// The first write is answered before Close starts, so the test never
	// sees only refusals, however the goroutines happen to be scheduled;
	// half the rest start before Close and half after.
	write(0)
	for i := 1; i < n/2; i++ {
		go write(i)
	}
	go d.Close()
	for i := n / 2; i < n; i++ {
		go write(i)
	}
	results := make([]outcome, 0, n)
	for i := 0; i < n; i++ {
		results = append(results, <-out)
	}
	d.Close()
	d, err = db.Open(ctx, path, db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var committed, refused int
	for _, r := range results {
		var v string
		err := d.View(ctx, func(tx broker.Tx) (err error) {
			v, err = tx.Setting(ctx, r.key)
			return err
		})
		switch {
		case r.err == nil:
			committed++
			if err != nil || v != "v" {
				t.Errorf("%s: answered as committed, not found after reopening (%v)", r.key, err)
			}
		case errors.Is(r.err, db.ErrClosed):
			refused++
			if err == nil {
				t.Errorf("%s: refused, yet found after reopening", r.key)
			}
		default:
			t.Errorf("%s: %v", r.key, r.err)
		}
	}
	if committed == 0 {
		t.Error("no write was answered as committed, not even the one made before Close")
	}
	t.Logf("%d committed, %d refused", committed, refused)
}

// Low-priority writes queued behind a stream of ordinary ones all run,
// and so do the ordinary ones.
func TestLowPriorityWritesRunWhenIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(t.TempDir(), "l.db"), db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const n = 100
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		go func(i int) {
			errs <- d.Update(ctx, broker.UpdateOptions{Background: true}, func(tx broker.Tx) error { return tx.SetSetting(ctx, fmt.Sprintf("low%d", i), "v") })
		}(i)
		go func(i int) {
			errs <- d.Update(ctx, broker.UpdateOptions{}, func(tx broker.Tx) error { return tx.SetSetting(ctx, fmt.Sprintf("k%d", i), "v") })
		}(i)
	}
	for i := 0; i < 2*n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, prefix := range []string{"low", "k"} {
		for i := 0; i < n; i++ {
			if err := d.View(ctx, func(tx broker.Tx) error {
				_, err := tx.Setting(ctx, fmt.Sprintf("%s%d", prefix, i))
				return err
			}); err != nil {
				t.Fatalf("%s%d: %v", prefix, i, err)
			}
		}
	}
}

// The write-ahead log is copied back into the database in the background
// soon after writes, well before the writer's own safety checkpoint: the
// database file grows with what was written while nothing else happens.
func TestBackgroundCheckpointCopiesTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	d, err := db.Open(ctx, path, db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b := broker.New(broker.Config{Store: d})
	payload := []byte(`{"pad":"` + strings.Repeat("x", 2000) + `"}`)
	items := make([]broker.PushItem, 100)
	for i := range items {
		items[i] = broker.PushItem{Queue: "q", Payload: payload}
	}
	for range 10 { // about 2 MB: 500 pages, far below the writer's own threshold
		if _, err := b.Push(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > before.Size()+1<<20 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("database file still %d bytes (was %d) 5 s after 2 MB of writes: no checkpoint", st.Size(), before.Size())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
