package sqlite

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
)

// The writer's and the read pool's tests: SQLite's store alone (moved
// from package db, where they ran on SQLite only).

func TestReadPoolCannotWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "l.db"), SyncNormal)
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
	d, err := Open(ctx, filepath.Join(t.TempDir(), "l.db"), SyncNormal)
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

// Low-priority writes queued behind a stream of ordinary ones all run,
// and so do the ordinary ones.
func TestLowPriorityWritesRunWhenIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "l.db"), SyncNormal)
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
	d, err := Open(ctx, path, SyncNormal)
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
