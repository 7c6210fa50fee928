package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Space that is reused and given back (issue 16).
//
// Deleted rows leave their pages on SQLite's freelist, and new rows take
// them first: under steady load with retention the file stops growing
// whatever the settings. auto_vacuum=INCREMENTAL adds the way back:
// `PRAGMA incremental_vacuum(N)` moves up to N pages from the end of the
// file into free ones and cuts the file. Its cost is the pointer-map
// pages SQLite keeps to move pages: measured on the lifecycle (push, pop,
// ack one at a time) 9.47 WAL pages a message against 9.41 without, and
// CPU a message within the noise (88–90 µs against 88–93 µs). So every
// database has it: new ones from their first table (the writer's pool
// asks for it at connect, _auto_vacuum), older ones converted once at
// open (convertAutoVacuum), and the space task of maintenance gives free
// pages back a few at a time (broker.SpaceStep).
//
// The PostgreSQL store reports the size of its tables and gives nothing
// back: the server's vacuum makes deleted rows' room reusable, and
// giving it back to the file system is the administrator's (Space).

// autoVacuumIncremental is PRAGMA auto_vacuum's value for INCREMENTAL.
const autoVacuumIncremental = 2

// spaceSQL reads the database header's numbers in one statement.
const spaceSQL = `SELECT page_size, page_count, freelist_count, auto_vacuum
	FROM pragma_page_size(), pragma_page_count(), pragma_freelist_count(), pragma_auto_vacuum()`

// Space is Space on SQLite.
func (dialect) Space(ctx context.Context, t *sqlcore.Tx) (broker.Space, error) {
	var s broker.Space
	var av int
	if err := t.QueryRow(ctx, spaceSQL).Scan(&s.PageSize, &s.Pages, &s.FreePages, &av); err != nil {
		return broker.Space{}, fmt.Errorf("space: %w", err)
	}
	s.Reclaims = av == autoVacuumIncremental
	return s, nil
}

// GiveBackPages is GiveBackPages on SQLite.
func (dialect) GiveBackPages(ctx context.Context, t *sqlcore.Tx, pages int) (int64, error) {
	before, err := t.Space(ctx)
	if err != nil {
		return 0, err
	}
	if !before.Reclaims || before.FreePages == 0 {
		return 0, nil
	}
	// The pragma takes no bound parameter: the count is written in (an
	// int, never text from outside). It frees a page a step: run to the
	// end.
	// Through t.query, as every statement: its context is checked first,
	// and on the writer nothing watches it while it runs (a watcher's late
	// interrupt could reach the writer's next statement).
	rows, err := t.Query(ctx, "PRAGMA incremental_vacuum("+strconv.Itoa(pages)+")")
	if err != nil {
		return 0, fmt.Errorf("give back pages: %w", err)
	}
	for rows.Next() {
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, fmt.Errorf("give back pages: %w", err)
	}
	after, err := t.Space(ctx)
	if err != nil {
		return 0, err
	}
	return before.FreePages - after.FreePages, nil
}

// vacuumRoom is what converting needs beyond the database's data: the
// rest of the write-ahead log and the temporary file's own pages.
const vacuumRoom = 64 << 20

// freeBytes says how many bytes the file system holding path has free
// for this process; a variable for the tests.
var freeBytes = func(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// tempDir is the directory SQLite writes its temporary files in
// (the VACUUM's copy): the first of SQLITE_TMPDIR, TMPDIR, /var/tmp,
// /usr/tmp, /tmp that is a writable directory, else the current one, as
// SQLite's unix VFS chooses.
func tempDir() string {
	for _, d := range []string{os.Getenv("SQLITE_TMPDIR"), os.Getenv("TMPDIR"), "/var/tmp", "/usr/tmp", "/tmp"} {
		if d == "" {
			continue
		}
		if st, err := os.Stat(d); err == nil && st.IsDir() && syscall.Access(d, 2|1 /* W_OK|X_OK */) == nil {
			return d
		}
	}
	return "."
}

// sameDevice reports whether two paths are on one file system.
func sameDevice(a, b string) bool {
	var sa, sb syscall.Stat_t
	if syscall.Stat(a, &sa) != nil || syscall.Stat(b, &sb) != nil {
		return true // the cautious answer: both copies on one disk
	}
	return sa.Dev == sb.Dev
}

// convertAutoVacuum makes a database made without auto_vacuum=INCREMENTAL
// (before issue 16) able to give free pages back: a VACUUM, once, with
// the setting asked for first. It rewrites
// the whole file, so it is logged with the sizes and the time it took;
// it needs room for a copy of the data in SQLite's temporary directory
// and as much again for the write-ahead log beside the database, and
// when the disk lacks it the database is left as it is (its free pages
// are still reused, the file only does not shrink) and the log says how
// much to free. Nothing else uses the database yet.
func (d *Store) convertAutoVacuum(ctx context.Context) error {
	conn, err := d.write.Conn(ctx)
	if err != nil {
		return fmt.Errorf("auto_vacuum: %w", err)
	}
	defer conn.Close()
	t := sqlcore.NewTx(reader{conn: conn}, dialect{}, sqlcore.NoLocks{}, nil)
	s, err := t.Space(ctx)
	if err != nil {
		return fmt.Errorf("auto_vacuum: %w", err)
	}
	if s.Reclaims {
		return nil
	}
	data := uint64(s.Pages-s.FreePages) * uint64(s.PageSize)
	dir, tmp := filepath.Dir(d.path), tempDir()
	needHere, needTmp := data+vacuumRoom, data+vacuumRoom
	if sameDevice(dir, tmp) {
		needHere, needTmp = 2*data+vacuumRoom, 0
	}
	for _, c := range []struct {
		dir  string
		need uint64
	}{{dir, needHere}, {tmp, needTmp}} {
		if c.need == 0 {
			continue
		}
		free, err := freeBytes(c.dir)
		if err != nil {
			return fmt.Errorf("auto_vacuum: free space of %s: %w", c.dir, err)
		}
		if free < c.need {
			d.log.Warn("space: the database is not converted to give free space back (auto_vacuum=INCREMENTAL): the conversion copies it, and "+c.dir+" lacks the room; deleted rows' space is still reused, but the file does not shrink. Free the space and restart to convert",
				"need_bytes", c.need, "free_bytes", free, "data_bytes", data)
			return nil
		}
	}
	d.log.Info("space: converting the database once so that it can give free space back (auto_vacuum=INCREMENTAL, a VACUUM); this rewrites the file",
		"bytes", s.Bytes(), "free_bytes", s.FreeBytes())
	start := time.Now()
	// The copy goes to a temporary file, not to memory (temp_store): it
	// is as big as the database.
	if _, err := conn.ExecContext(ctx, "PRAGMA temp_store=FILE"); err != nil {
		return fmt.Errorf("auto_vacuum: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA auto_vacuum = INCREMENTAL"); err != nil {
		return fmt.Errorf("auto_vacuum: %w", err)
	}
	_, verr := conn.ExecContext(ctx, "VACUUM")
	if _, err := conn.ExecContext(context.Background(), "PRAGMA temp_store=MEMORY"); err != nil {
		// A connection left writing temporary tables to disk would be
		// slower, not wrong; the pool keeps it.
		d.log.Warn("space: temp_store back to MEMORY", "err", err)
	}
	if isNoSpace(verr) {
		// The room was there when checked, not for the whole copy: the
		// VACUUM rolled back, the database is as it was. Serve it.
		d.log.Warn("space: the database is not converted to give free space back (auto_vacuum=INCREMENTAL): the disk filled up during the copy; deleted rows' space is still reused, but the file does not shrink. Free space and restart to convert",
			"data_bytes", data, "err", verr)
		return nil
	}
	if verr != nil {
		return fmt.Errorf("auto_vacuum: convert (VACUUM): %w", unavailable(verr))
	}
	// The VACUUM wrote the whole database into the log: give that space
	// back before serving.
	var busy, logPages, done int
	if err := conn.QueryRowContext(ctx, `PRAGMA main.wal_checkpoint(TRUNCATE)`).Scan(&busy, &logPages, &done); err != nil || busy != 0 {
		d.log.Warn("space: truncate the write-ahead log after converting", "err", err, "busy", busy != 0)
	}
	after, err := t.Space(ctx)
	if err != nil {
		return fmt.Errorf("auto_vacuum: %w", err)
	}
	if !after.Reclaims {
		return errors.New("auto_vacuum: still not INCREMENTAL after VACUUM")
	}
	d.log.Info("space: database converted: it gives free space back from now on",
		"bytes_before", s.Bytes(), "bytes_after", after.Bytes(), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// createGivingSpaceBack makes the database file at path, when there is
// none yet (or it is empty), with auto_vacuum=INCREMENTAL and its first
// table, on a connection of its own with the writer's parameters (dsn)
// and _auto_vacuum: SQLite writes the setting into the file with the
// first page, and journal_mode=WAL, set at connect, writes that page.
// The pools' connections do not ask for it: PRAGMA auto_vacuum writes
// the file's header whenever a connection sets it on a database that
// has it already, a commit nobody asked for each time a pool connects.
func createGivingSpaceBack(ctx context.Context, path string, dsn url.Values) error {
	if st, err := os.Stat(path); err == nil && (st.Size() > 0 || !st.Mode().IsRegular()) {
		return nil // made before: convertAutoVacuum's, after the migrations
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil // the open that follows says what is wrong with the path
	}
	params := url.Values{}
	for k, v := range dsn {
		params[k] = v
	}
	params.Set("_auto_vacuum", "incremental")
	first, err := sql.Open(DriverName, "file:"+path+"?"+params.Encode())
	if err != nil {
		return fmt.Errorf("auto_vacuum: %w", err)
	}
	defer first.Close()
	first.SetMaxOpenConns(1)
	if _, err := first.ExecContext(ctx, schemaMigrationsSQL); err != nil {
		return fmt.Errorf("auto_vacuum: first table: %w", err)
	}
	return first.Close()
}
