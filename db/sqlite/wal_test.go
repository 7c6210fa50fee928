package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/mattn/go-sqlite3"
)

// The writer's log hook records the log's length after each commit: the
// frames SQLite itself reports.
func TestTheWritersLogHookKnowsTheLogsLength(t *testing.T) {
	t.Parallel()
	d, b := openBroker(t)
	ctx := context.Background()
	for i := range 5 {
		push(t, b, "p", fmt.Sprint("m", i))
		got := d.main.wal.frames()
		var busy, log, done int
		if err := d.write.QueryRowContext(ctx, `PRAGMA main.wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done); err != nil {
			t.Fatal(err)
		}
		if got <= 0 || got != log {
			t.Fatalf("after push %d the hook says %d frames, SQLite %d", i, got, log)
		}
	}
}

// A checkpoint starts at once, not checkpointEvery later, each time the
// log has grown by checkpointFrames; a log started over counts from 0.
func TestCheckpointsStartWhenTheLogGrows(t *testing.T) {
	t.Parallel()
	d := &Store{ckptNow: make(chan struct{}, 1)}
	for _, step := range []struct {
		frames int
		kick   bool
	}{
		{10, false}, {checkpointFrames - 1, false}, {checkpointFrames, true}, {checkpointFrames + 500, false},
		{2*checkpointFrames + 1, true}, {30, false}, {checkpointFrames - 1, false}, {checkpointFrames, true},
	} {
		d.kickByFrames(step.frames)
		kicked := false
		select {
		case <-d.ckptNow:
			kicked = true
		default:
		}
		if kicked != step.kick {
			t.Fatalf("at %d frames: kicked %v, want %v", step.frames, kicked, step.kick)
		}
	}
}

// Past its safety length the hook checkpoints on the committing
// connection, as SQLite's wal_autocheckpoint (which it replaces) would:
// the next write then starts the log over.
func TestTheLogHookCheckpointsPastItsSafetyLength(t *testing.T) {
	t.Parallel()
	for _, safety := range []int{0, 10} {
		t.Run(fmt.Sprint("safety ", safety), func(t *testing.T) {
			ctx := context.Background()
			db, err := sql.Open(DriverName, "file:"+filepath.Join(t.TempDir(), "w.db")+"?_journal_mode=WAL")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var w *walWatch
			if err := c.Raw(func(dc any) error {
				w, err = watchWAL(dc.(*sqlite3.SQLiteConn), safety)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer func() { c.Close(); db.Close(); w.free() }()
			for _, q := range []string{`CREATE TABLE t (v TEXT)`, `INSERT INTO t SELECT '` + strings.Repeat("x", 1000) + `' FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 200) SELECT i FROM n)`} {
				if _, err := c.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			big := w.frames()
			if _, err := c.ExecContext(ctx, `INSERT INTO t VALUES ('one more')`); err != nil {
				t.Fatal(err)
			}
			after := w.frames()
			if safety > 0 && after >= big {
				t.Errorf("with a safety of %d frames: %d frames after a commit of %d, want the log started over", safety, after, big)
			}
			if safety == 0 && after <= big {
				t.Errorf("without a safety: %d frames after %d, want the log to grow", after, big)
			}
		})
	}
}

// Under steady writes the log stays short: past catchUpFrames the writer
// copies the log back between two transactions, so the next write starts
// it over, again and again. (Without the catch-up, a background
// checkpoint running beside the writer never ended with the whole log
// copied, and the log grew past 25,000 frames. The background one is off
// here so that the bound does not depend on the scheduler.)
func TestTheLogStaysShortUnderSteadyWrites(t *testing.T) {
	t.Parallel()
	// No indexer: its look at the log once a second reads the store's
	// file, and a catch-up that met that read could not start the log
	// over (TestCatchUpsBackOffWhileReadersHoldTheLog is about readers).
	d, err := openWith(context.Background(), filepath.Join(t.TempDir(), "l.db"), Options{Sync: SyncNormal}, knobs{onlyCatchUp: true, manualIndexer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	longest, restarts, last := 0, 0, 0
	for i := range 6000 {
		push(t, b, "p", fmt.Sprint("m", i))
		n := d.main.wal.frames()
		longest = max(longest, n)
		if n < last {
			restarts++
		}
		last = n
	}
	if longest > catchUpFrames+50 || restarts < 5 {
		t.Errorf("the log grew to %d frames and started over %d times; want it under %d and started over at least 5 times", longest, restarts, catchUpFrames+50)
	}
}

// Readers that keep part of the log (a dashboard's queries beside steady
// pushes) make a catch-up copy less than the whole log: the writer then
// waits for the log to grow by checkpointFrames before it tries again,
// rather than try after every commit. And a catch-up runs in the writer
// goroutine, never in the Update of the caller whose commit made it due.
func TestCatchUpsBackOffWhileReadersHoldTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := openWith(ctx, filepath.Join(t.TempDir(), "l.db"), Options{Sync: SyncNormal}, knobs{onlyCatchUp: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	inCaller := 0
	d.catchUpHook = func() {
		if !strings.Contains(string(debug.Stack()), "(*Store).writer(") {
			inCaller++
		}
	}
	b := broker.New(broker.Config{Store: d})
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := d.View(ctx, func(tx broker.Tx) error {
					_, err := tx.Queues(ctx)
					return err
				}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	const pushes = 4000
	for i := range pushes {
		push(t, b, "p", fmt.Sprint("m", i))
	}
	close(stop)
	readers.Wait()
	var tries, callers, frames int
	if err := d.Update(ctx, broker.UpdateOptions{}, func(broker.Tx) error {
		tries, callers, frames = d.catchUps, inCaller, d.walLast
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Each push adds a few frames; at most one try for each
	// checkpointFrames of them, and one after each start over.
	if limit := pushes * 8 / checkpointFrames; tries > limit {
		t.Errorf("%d catch-ups for %d pushes (log %d frames at the end), want at most %d", tries, pushes, frames, limit)
	}
	if callers > 0 {
		t.Errorf("%d catch-ups ran in a caller's Update, want all in the writer goroutine", callers)
	}
}

// Beside a background checkpointer, a catch-up is asked for only while
// few frames were written since its last run: the writer never syncs a
// bulk job's log on its path.
func TestACatchUpIsAskedForOnlyForTheLastFewFrames(t *testing.T) {
	t.Parallel()
	d := &Store{ckptNow: make(chan struct{}, 1), ckptDone: make(chan struct{})}
	d.bgSynced.Store(catchUpFrames)
	for _, step := range []struct {
		frames int
		due    bool
	}{
		{catchUpFrames + catchUpResidual, true}, {catchUpFrames + catchUpResidual + 1, false},
		{catchUpFrames + 7000, false}, // a bulk job's chunk since the last background checkpoint
	} {
		d.catchUpDue.Store(false)
		d.kickByFrames(step.frames)
		if got := d.catchUpDue.Load(); got != step.due {
			t.Errorf("at %d frames, %d synced by the background: catch-up asked for %v, want %v", step.frames, d.bgSynced.Load(), got, step.due)
		}
	}
}
