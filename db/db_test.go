package db_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
