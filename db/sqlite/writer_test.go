package sqlite

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

// lateWrite is an Update (o) of a setting whose function tells which
// transaction it ran in (its broker.Tx), and fails after writing when
// fail is set.
func lateWrite(d *Store, o broker.UpdateOptions, key string, fail error, ran *broker.Tx) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- d.Update(context.Background(), o, func(tx broker.Tx) error {
			*ran = tx
			if err := tx.SetSetting(context.Background(), key, "v"); err != nil {
				return err
			}
			return fail
		})
	}()
	return done
}

// settingsKept says which of keys a read finds.
func settingsKept(t *testing.T, d *Store, keys ...string) map[string]bool {
	t.Helper()
	kept := map[string]bool{}
	for _, k := range keys {
		err := d.View(context.Background(), func(tx broker.Tx) error {
			_, err := tx.Setting(context.Background(), k)
			return err
		})
		switch {
		case err == nil:
			kept[k] = true
		case !errors.Is(err, broker.ErrNotFound):
			t.Fatalf("%s: %v", k, err)
		}
	}
	return kept
}

// The writes that queue while a transaction runs join it before its
// COMMIT (late joiners): they run in the same transaction, and one that
// fails after writing leaves nothing behind and undoes none of the
// others (the group runs again, each in a savepoint: the first write
// too). A write alone that failed takes none (it ran without a
// savepoint), nor does a background write, nor a transaction past
// lateFor: then the queued writes commit apart. Under FULL, a lease's
// transaction (committed with synchronous=NORMAL) takes only the leases
// at the head of the queue: a durable write waits for a commit that
// waits for the disk, and the lease behind it with it.
func TestWritesQueuedWhileATransactionRunsJoinIt(t *testing.T) {
	t.Parallel()
	errFails := errors.New("fails after writing")
	for _, tc := range []struct {
		name       string
		firstFails bool
		background bool
		lateFor    time.Duration
		lateFails  bool
		leases     bool // under FULL: the first write and c leases, b not
		joined     bool
	}{
		{name: "joined", lateFor: time.Hour, joined: true},
		{name: "a late joiner fails", lateFor: time.Hour, lateFails: true, joined: true},
		{name: "the first fails", lateFor: time.Hour, firstFails: true},
		{name: "background", lateFor: time.Hour, background: true},
		{name: "past lateFor", lateFor: 0},
		{name: "a durable write behind a lease's", lateFor: time.Hour, leases: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			sync := SyncNormal
			if tc.leases {
				sync = SyncFull
			}
			d, err := Open(ctx, filepath.Join(t.TempDir(), "l.db"), sync)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			d.lateFor = tc.lateFor
			var first, b, c broker.Tx
			running := make(chan struct{})
			firstDone := make(chan error, 1)
			runs := 0 // the group runs again when a late joiner fails
			go func() {
				firstDone <- d.Update(ctx, broker.UpdateOptions{Background: tc.background, Ephemeral: tc.leases}, func(tx broker.Tx) error {
					first = tx
					if err := tx.SetSetting(ctx, "a", "v"); err != nil {
						return err
					}
					if runs++; runs == 1 {
						close(running)
						waitQueued(d, 2) // b and c wait for this transaction
					}
					if tc.firstFails {
						return errFails
					}
					return nil
				})
			}()
			<-running
			var lateErr error
			if tc.lateFails {
				lateErr = errFails
			}
			bDone := lateWrite(d, broker.UpdateOptions{}, "b", lateErr, &b)
			waitQueued(d, 1)
			cDone := lateWrite(d, broker.UpdateOptions{Ephemeral: tc.leases}, "c", nil, &c)
			errA, errB, errC := <-firstDone, <-bDone, <-cDone
			if tc.firstFails != errors.Is(errA, errFails) || (!tc.firstFails && errA != nil) {
				t.Errorf("the first write: %v", errA)
			}
			if tc.lateFails != errors.Is(errB, errFails) || (!tc.lateFails && errB != nil) {
				t.Errorf("b: %v", errB)
			}
			if errC != nil {
				t.Errorf("c: %v", errC)
			}
			if (b == first) != tc.joined || (c == first) != tc.joined {
				t.Errorf("b and c ran in the first write's transaction: %v, %v, want %v", b == first, c == first, tc.joined)
			}
			wantRuns, want := 1, map[string]bool{"c": true}
			if tc.lateFails {
				wantRuns = 2
			} else {
				want["b"] = true
			}
			if !tc.firstFails {
				want["a"] = true
			}
			if runs != wantRuns {
				t.Errorf("the first write ran %d times, want %d", runs, wantRuns)
			}
			if got := settingsKept(t, d, "a", "b", "c"); !maps.Equal(got, want) {
				t.Errorf("kept %v, want %v", got, want)
			}
		})
	}
}

// Only the connection of the background writes has the search file
// attached (lane): the ordinary writes run on the other, and a
// background one (a job's chunk, which may select by text) on it.
func TestOnlyTheBackgroundWritesHaveTheSearchFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := openTestStore(t)
	attached := func(l *lane) bool {
		rows, err := l.conn.QueryContext(ctx, `SELECT name FROM pragma_database_list`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			if name == "search" {
				return true
			}
		}
		return false
	}
	if attached(&d.main) || !attached(&d.bg) {
		t.Fatalf("search file attached: ordinary writes %v, background writes %v; want false, true", attached(&d.main), attached(&d.bg))
	}
	for _, o := range []broker.UpdateOptions{{}, {Background: true}} {
		main, bg := d.main.raw.statementsRun(), d.bg.raw.statementsRun()
		if err := d.Update(ctx, o, func(tx broker.Tx) error { return tx.SetSetting(ctx, "k", "v") }); err != nil {
			t.Fatal(err)
		}
		ranOnBg := d.bg.raw.statementsRun() > bg
		if ranOnMain := d.main.raw.statementsRun() > main; ranOnMain == ranOnBg || ranOnBg != o.Background {
			t.Errorf("a write (background %v) ran on the ordinary writes' connection %v, on the background's %v", o.Background, ranOnMain, ranOnBg)
		}
	}
}
