package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A search file SQLite cannot read as a database is set aside as it
// opens (kept as <path>-search.damaged) and built again from the dead
// letters: the store opens and its searches find what they found.
func TestADamagedSearchFileIsSetAsideAndBuiltAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	var logs syncBuffer
	reopen := func() (*Store, *broker.Broker) {
		t.Helper()
		d, err := OpenWith(ctx, path, Options{Sync: SyncNormal, Exclusive: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("open with a damaged search file: %v", err)
		}
		return d, broker.New(broker.Config{Store: d})
	}
	d, b := reopen()
	fileInCommits(t, b, 2)
	synced(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	garbage := bytes.Repeat([]byte("not a database at all "), 1000)
	if err := os.WriteFile(searchPath(path), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	// A tool beside the server (not holding the database) leaves it
	// where it is, and says why it cannot open.
	if _, err := OpenWith(ctx, path, Options{Sync: SyncNormal}); err == nil || !strings.Contains(err.Error(), "search file") || !strings.Contains(err.Error(), "builds it again") {
		t.Fatalf("a tool's open of a damaged search file: %v", err)
	}
	if _, err := os.Stat(searchPath(path) + damagedSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a tool set the search file aside: %v", err)
	}
	d, b = reopen()
	defer d.Close()
	if got := found(t, b, broker.DLQQuery{Text: "eur"}); !slices.Equal(got, []string{"t-0", "t-1"}) {
		t.Fatalf("after the rebuild eur found %v, want t-0 and t-1", got)
	}
	if kept, err := os.ReadFile(searchPath(path) + damagedSuffix); err != nil || !bytes.Equal(kept, garbage) {
		t.Fatalf("the damaged file is not kept as %s: %v", filepath.Base(searchPath(path)+damagedSuffix), err)
	}
	if out := logs.String(); !strings.Contains(out, "search file damaged") || !strings.Contains(out, "not a database") {
		t.Fatalf("the log does not say the search file was set aside, and why:\n%s", out)
	}
}

// openServer opens the store at path as the server does (holding the
// database: Options.Exclusive), closed at the test's end.
func openServer(t *testing.T, path string, k ...knobs) (*Store, *broker.Broker) {
	t.Helper()
	var kn knobs
	if len(k) > 0 {
		kn = k[0]
	}
	d, err := openWith(context.Background(), path, Options{Sync: SyncNormal, Exclusive: true}, kn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, broker.New(broker.Config{Store: d})
}

// damagedBeneath files two dead letters at path, then closes the store
// and overwrites the root pages of the search file's full-text tables:
// damage that opening the search file does not read.
func damagedBeneath(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	d, b := openServer(t, path)
	fileInCommits(t, b, 2)
	synced(t, d)
	var roots []int64
	onSearch(t, d, func(c *sql.Conn) {
		rows, err := c.QueryContext(ctx, `SELECT rootpage FROM main.sqlite_master WHERE name LIKE 'dead_letter_%' AND rootpage > 0`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var r int64
			if err := rows.Scan(&r); err != nil {
				t.Fatal(err)
			}
			roots = append(roots, r)
		}
	})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if len(roots) == 0 {
		t.Fatal("no full-text table found in the search file")
	}
	f, err := os.OpenFile(searchPath(path), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte{0xA5}, 4096)
	for _, r := range roots {
		if _, err := f.WriteAt(junk, (r-1)*4096); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Damage past the search file's first pages, which opening it does not
// read, is found by the indexer or by a search: it leaves a marker,
// searches fail at once saying to restart, and the next start sets the
// file aside and builds it again.
func TestDamageFoundWhileRunningIsMendedAtTheNextStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, by := range []string{"the indexer", "a search"} {
		t.Run(by, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l.db")
			damagedBeneath(t, path)
			marker := searchPath(path) + damageMarker
			noted := func() bool {
				_, err := os.Stat(marker)
				return err == nil
			}
			var d *Store
			var b *broker.Broker
			if by == "the indexer" {
				d, b = openServer(t, path)
				fileOne(t, ctx, b, "after", `{"word":"afterwards"}`)
				indexerReaches(t, d, true, "the marker of the damage", noted)
			} else {
				// The indexer looks unasked only hourly (no merge of
				// its own finds the damage): the search's does.
				d, b = openServer(t, path, knobs{tick: time.Hour})
				if _, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Group: "g", Text: "eur"}); err == nil {
					t.Fatal("a search of a damaged search file found no fault")
				}
				indexerReaches(t, d, false, "the marker of the damage", noted)
			}
			_, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Group: "g", Text: "eur"})
			if !errors.Is(err, broker.ErrUnavailable) || !strings.Contains(err.Error(), "restart") {
				t.Fatalf("a search of a damaged search file: %v; want unavailable, saying to restart", err)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("no marker of the damage: %v", err)
			}
			// Reads that do not search go on.
			if page, err := b.DeadLetters(ctx, broker.DLQQuery{Queue: "q", Group: "g"}); err != nil || len(page.Items) == 0 {
				t.Fatalf("a list without a search beside a damaged search file: %d dead letters, %v", len(page.Items), err)
			}
			if st, err := d.TextIndex(ctx); err != nil || !st.Failing {
				t.Fatalf("the metrics' state of a damaged search file: %+v, %v", st, err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			_, b = openServer(t, path)
			if got := found(t, b, broker.DLQQuery{Text: "eur"}); !slices.Equal(got, []string{"t-0", "t-1"}) {
				t.Fatalf("after the restart eur found %v", got)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the marker is left after the rebuild: %v", err)
			}
			if _, err := os.Stat(searchPath(path) + damagedSuffix); err != nil {
				t.Fatalf("the damaged file is not kept: %v", err)
			}
		})
	}
}

// Damage that SQLite reports of a statement that read both files, and
// that the search file's own check does not find there, is the store's
// file's: no marker; and the check, which reads the whole search file,
// is not run again soon.
func TestDamageTheSearchFilesCheckDoesNotFindIsNotItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := openManual(t, filepath.Join(t.TempDir(), "l.db"))
	malformed := fmt.Errorf("read: %w", sqlite3.Error{Code: sqlite3.ErrCorrupt})
	if d.search.damage(ctx, malformed, true) || d.search.damageNoted.Load() {
		t.Fatal("a sound search file was taken for damaged")
	}
	if _, err := os.Stat(d.search.path + damageMarker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a marker was left for a sound search file: %v", err)
	}
	d.search.txMu.Lock()
	checked := d.search.soundAt
	d.search.txMu.Unlock()
	if checked.IsZero() {
		t.Fatal("the search file's check was not run")
	}
	d.search.damage(ctx, malformed, true)
	d.search.txMu.Lock()
	again := d.search.soundAt
	d.search.txMu.Unlock()
	if !again.Equal(checked) {
		t.Fatal("the search file was checked again at once")
	}
}

// Damage of the store's own file is not taken for the search file's: a
// server that cannot open its database leaves the search file where it
// is.
func TestADamagedDatabaseLeavesTheSearchFileAlone(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.db")
	d, b := openServer(t, path)
	fileInCommits(t, b, 1)
	synced(t, d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte("x"), 100), 0); err != nil { // the header
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err := openWith(context.Background(), path, Options{Sync: SyncNormal, Exclusive: true}, knobs{}); err == nil {
		d.Close()
		t.Fatal("opened a database whose header is garbage")
	}
	for _, f := range []string{searchPath(path) + damagedSuffix, searchPath(path) + damageMarker} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is there: the search file was taken for damaged (%v)", filepath.Base(f), err)
		}
	}
}

// TextIndex (the metrics' lazarus_search_*) says how many dead letters
// the indexer has yet to apply, the search file's size with its log, and
// whether the indexer fails.
func TestTextIndexSaysTheIndexersState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	d, b := openManual(t, path)
	state := func() broker.TextIndexState {
		t.Helper()
		st, err := d.TextIndex(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	fileInCommits(t, b, 3)
	if st := state(); st.Behind != 3 || st.Failing {
		t.Fatalf("3 dead letters filed, none applied: %+v", st)
	}
	if err := d.search.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	st := state()
	var size int64
	for _, f := range []string{searchPath(path), searchPath(path) + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			size += fi.Size()
		}
	}
	if st.Behind != 0 || st.Bytes != size || size == 0 {
		t.Fatalf("all applied: %+v, want behind 0 and %d bytes", st, size)
	}
	// A failing indexer (its state table gone) is told.
	d, b = openKnobs(t, filepath.Join(t.TempDir(), "l.db"), knobs{})
	fileInCommits(t, b, 1)
	synced(t, d)
	if _, err := d.ExecSearchUncatalogued(ctx, `DROP TABLE main.search_state`); err != nil {
		t.Fatal(err)
	}
	fileOne(t, ctx, b, "stuck", `{}`)
	indexerReaches(t, d, true, "its failure", func() bool { return d.search.failure.Load() != nil })
	if st := state(); !st.Failing || st.Behind != 1 {
		t.Fatalf("the indexer failing with one dead letter to apply: %+v", st)
	}
}
