package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// The full-text indexes of dead letters (their error texts, their
// payloads' words) live in a database file of their own beside the
// store's, <path>-search (issue 37, D7). Kept in the store's file, they
// were written by its one writer, which every push waits for: a merge
// of their segments writes a word's whole list of dead letters at once
// (about 8 MB, a few hundred milliseconds, for a word of every payload
// at a million dead letters), and a replay of many dead letters makes
// many merges. Here one goroutine of the store, the indexer, writes them
// on a connection of its own, and nothing the broker does waits for it
// but a read of the indexes (AwaitTextIndex).
//
// The transactions that file and remove dead letters log what the
// indexes must learn in the store's file (migration 0043: a row a dead
// letter, its id and its message's seq, in text_index_added when it is
// filed and in text_index_removed before it goes), atomically with the
// dead letters. The indexer reads the rows past the last it applied of
// each log, from a snapshot of the store's file (attached read-only as
// store: SQLite's readers do not wait for its writer), brings the index
// entries of those ids and seqs in line with the dead letters as that
// snapshot has them, and records the last row applied, and the last row
// of each log the snapshot held (seen), in the same transaction of the
// search file (search_state). Since an entry is brought in line with the
// dead letters as they stand, not with the row, rows may be applied in
// any order: the additions go first, so that a search waits for the
// dead letters filed, never behind the removals of a big replay (a
// removed dead letter is not found anyway: every search joins the
// dead letters). A crash anywhere loses nothing and applies nothing
// twice: the store's file holds the logs, the search file how far it
// got. The store's writer deletes the rows applied, a bounded few in a
// commit (beforeCommit).
//
// Every connection of the store attaches the search file (attachSearch),
// so the statements read the indexes by their names as before. A read of
// them first waits until the indexer has applied every addition its own
// snapshot of the store's file holds (AwaitTextIndex: read-your-writes,
// whichever process filed; a few milliseconds behind a burst of dead
// letters, at most searchWait, after which, or at once while the indexer
// is failing, it fails as unavailable).
//
// The search file is derived: when it is missing, of another database
// (search_uid), or out of step with the log (a copy of either restored
// from another time), the store builds it again from the dead letters as
// it opens, before it serves (about a minute at a million): out of step
// when a log's rows it applied are no longer all there (trimmed past
// applied) or when it saw rows the store's file does not have (seen
// past the last row assigned: a copy of the store's file from before,
// or its last commits lost to a power cut). A backup needs the store's
// file only.

const (
	// searchSuffix names the search file after the store's.
	searchSuffix = "-search"
	// searchVersion is the search file's layout; another is built again.
	searchVersion = 2
	// searchBatch is how many log rows a transaction of the indexer
	// applies at most.
	searchBatch = 2000
	// searchWait bounds how long a read of the indexes waits for them.
	searchWait = 30 * time.Second
	// maxWaiting bounds the reads that wait for the indexer at once, each
	// on a connection of the reading pool (readConns): half of it. One
	// more is refused at once, unavailable, rather than wait: the pool's
	// other half keeps serving the reads that search nothing.
	maxWaiting = readConns / 2
	// searchLinger is how long the indexer, woken by a commit that
	// logged rows, waits for more before it applies them (unless a read
	// waits for them: await hurries it): a burst of failures' dead
	// letters, filed an ack at a time, is then applied in a few
	// transactions of the search file instead of one each.
	searchLinger = 50 * time.Millisecond
	// searchTick is how often the indexer looks for rows unasked (those
	// another process logged: its commits do not wake this one).
	searchTick = time.Second
	// trimRows bounds the log rows a commit of the writer deletes, and
	// trimEvery how often it deletes some.
	trimRows  = 5000
	trimEvery = 100 * time.Millisecond
)

// searchIndex is the search file and its indexer.
type searchIndex struct {
	path string
	db   *sql.DB
	conn *sql.Conn // the indexer's, the store's file attached as store
	log  *slog.Logger

	// txMu makes the indexer's transactions one at a time (the
	// indexer's own, and RebuildTextIndex's).
	txMu sync.Mutex

	// added: the indexes hold every row of text_index_added up to it.
	added   atomic.Int64
	failure atomic.Pointer[string]
	// damageNoted: damage found the search file damaged (and left its
	// marker); soundAt: when its quick_check last found it sound (under
	// txMu).
	damageNoted atomic.Bool
	soundAt     time.Time

	mu       sync.Mutex
	progress chan struct{} // closed when applied moves (then replaced)

	wake    chan struct{} // rows were logged (kick)
	suspect chan error    // a read met damage (suspectDamage)
	hurry   chan struct{} // a read waits for them (hurryUp)
	stop    chan struct{}
	done    chan struct{}
	started bool
	batch   int           // log rows a transaction applies at most (searchBatch)
	keep    int64         // free pages kept before giveBack gives them back (giveBackPages)
	linger  time.Duration // searchLinger (start)
	tick    time.Duration // searchTick (start)
	waiting atomic.Int32  // reads waiting for the indexer (await)
	commits atomic.Int64  // batches applied (applyBatch), for tests

	// applied is each log's last row applied (the indexer's, read by
	// the writer's trim: atomics).
	applied [2]atomic.Int64
	// pending says of each log whether the snapshot of the indexer's
	// last batch held rows it had not applied (set under txMu, read by
	// catchUp: the indexer's goroutine, or a test's with manualIndexer).
	pending [2]bool

	// The writer's (its goroutine alone): a transaction logged rows
	// since the last commit; each log's rows up to trimmed are deleted,
	// last at trimmedAt; the bounds of the commit being made.
	dirty     bool
	trimmed   [2]int64
	trimmedAt time.Time
	trimTo    [2]int64
}

// The logs (migration 0043), in the order the indexer applies them.
const (
	logAdded = iota
	logRemoved
)

var logTables = [2]string{"text_index_added", "text_index_removed"}

// searchPath is the search file of the store's file path.
func searchPath(path string) string { return path + searchSuffix }

// openSearchFile opens (creating if need be) the search file of path and its
// tables, before any connection of the store opens, so that each
// attaches it. The indexer's connection attaches the store's file.
//
// A search file that SQLite finds damaged as it opens (not a database,
// its first pages malformed), or that this store found damaged while it
// ran (the marker damage leaves), is set aside as <path>-search.damaged,
// its log beside it, and made anew: prepare then builds it from the
// dead letters. It is derived data: nothing is lost but the time to
// build it. Only the process that holds the database (Options.Exclusive:
// the server) sets it aside; another (a tool beside the server) would
// move it from under the server's connections, and opens it as it is.
func openSearchFile(ctx context.Context, path string, o Options, log *slog.Logger) (*searchIndex, error) {
	sp := searchPath(path)
	why := ""
	if b, err := os.ReadFile(sp + damageMarker); err == nil && o.Exclusive {
		why = "found damaged while the server ran: " + strings.TrimSpace(string(b))
	} else {
		s, err := openSearchFileOnce(ctx, sp, path, o, log)
		var dmg *searchDamaged
		if !errors.As(err, &dmg) {
			return s, err
		}
		if !o.Exclusive {
			return nil, fmt.Errorf("%w (the server sets it aside and builds it again as it starts)", err)
		}
		why = err.Error()
	}
	if err := setAside(sp); err != nil {
		return nil, fmt.Errorf("search file %s is damaged (%s), and could not be set aside: %w", sp, why, err)
	}
	log.Warn("search file damaged: set aside, and built again from the dead letters", "file", sp, "kept_as", sp+damagedSuffix, "why", why)
	return openSearchFileOnce(ctx, sp, path, o, log)
}

const (
	// damagedSuffix names a damaged search file set aside.
	damagedSuffix = ".damaged"
	// damageMarker names the file a store leaves when it finds the
	// search file damaged as it runs: the next start sets the file aside.
	damageMarker = "-damaged"
)

// searchDamaged is the error of a statement of the search file's own
// (none of the store's file) that found it damaged.
type searchDamaged struct{ err error }

func (e *searchDamaged) Error() string { return e.err.Error() }
func (e *searchDamaged) Unwrap() error { return e.err }

// damaged reports whether err is SQLite's finding that a file is not a
// database or is malformed: the search file's or the store's, which the
// statements of either may read (confirmDamage tells them apart).
func damaged(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrCorrupt || se.Code == sqlite3.ErrNotADB)
}

// setAside moves the search file sp and its log to sp.damaged (replacing
// one set aside before, and its log), drops its shared memory, and
// removes the marker: sp is then made anew.
func setAside(sp string) error {
	err := os.Rename(sp, sp+damagedSuffix)
	switch {
	case err == nil:
		err = os.Rename(sp+"-wal", sp+damagedSuffix+"-wal")
		if errors.Is(err, os.ErrNotExist) {
			err = os.Remove(sp + damagedSuffix + "-wal") // the log of a copy set aside before
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	case errors.Is(err, os.ErrNotExist):
		// Nothing to set aside: a log without its file goes.
		if err := os.Remove(sp + "-wal"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	default:
		return err
	}
	for _, f := range []string{sp + "-shm", sp + damageMarker} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// damage is told err, an error of a statement that read the search file
// (the indexer's, a merge's, a search's, or the store's open): when
// SQLite found the search file damaged, it leaves the marker that has
// the next start set the search file aside, has searches fail at once
// saying so, and reports true (and so for every later damage it is
// told of, once it has). A full-text table
// that is damaged (SQLITE_CORRUPT_VTAB: only the search file has them)
// is the search file's. Any other damage may be the store's file's,
// which those statements read too: when check, the search file's own
// quick_check decides (it reads the whole file: a file it found sound is
// not checked again for damageRecheck); otherwise it is left unsaid.
func (s *searchIndex) damage(ctx context.Context, err error, check bool) bool {
	if !damaged(err) {
		return false
	}
	if s.damageNoted.Load() {
		return true
	}
	var se sqlite3.Error
	vtab := errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrCorruptVTab
	if !vtab && (!check || !s.confirmDamage(ctx)) {
		return false
	}
	if s.damageNoted.Swap(true) {
		return true
	}
	msg := "the search file is damaged: restart Lazarus to have it set aside and built again from the dead letters (" + err.Error() + ")"
	if werr := os.WriteFile(s.path+damageMarker, []byte(err.Error()+"\n"), 0o600); werr != nil {
		msg = "the search file is damaged, and the marker that has the next start build it again could not be written (" + werr.Error() + "): stop Lazarus, delete " + s.path + " and start it again (" + err.Error() + ")"
	}
	s.failure.Store(&msg)
	s.notify() // the reads waiting give up
	s.log.Error("search file damaged", "file", s.path, "err", err, "what_to_do", msg)
	return true
}

// suspectDamage hands err, a read's that SQLite found a file damaged in,
// to the indexer, which checks whether it is the search file (damage):
// a read does not hold its connection for the whole file's check.
func (s *searchIndex) suspectDamage(err error) {
	if !damaged(err) || s.damageNoted.Load() {
		return
	}
	select {
	case s.suspect <- err:
	default:
	}
}

// damageRecheck is how long a search file that its quick_check found
// sound is not checked again (the damage SQLite reported was the store's
// file's, and the check reads the whole search file).
const damageRecheck = 10 * time.Minute

// confirmDamage checks the search file alone (PRAGMA main.quick_check on
// the indexer's connection, where the store's file is attached as
// store): true when SQLite finds it damaged. One found sound within
// damageRecheck is not checked again.
func (s *searchIndex) confirmDamage(ctx context.Context) bool {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	if s.damageNoted.Load() {
		return true
	}
	if t := s.soundAt; !t.IsZero() && time.Since(t) < damageRecheck {
		return false
	}
	var res string
	err := s.conn.QueryRowContext(ctx, `PRAGMA main.quick_check(1)`).Scan(&res)
	if err == nil && res == "ok" {
		s.soundAt = time.Now()
	}
	return damaged(err) || err == nil && res != "ok"
}

// openSearchFileOnce is openSearchFile without the setting aside: the
// search file sp of the store's file path.
func openSearchFileOnce(ctx context.Context, sp, path string, o Options, log *slog.Logger) (*searchIndex, error) {
	createPrivate(sp)
	params := url.Values{}
	params.Set("_journal_mode", "WAL")
	// NORMAL: the search file is derived from the store's, and a commit
	// lost to a power cut is applied again from the log (WAL keeps the
	// file whole).
	params.Set("_synchronous", "NORMAL")
	params.Set("_busy_timeout", strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10))
	params.Set("_foreign_keys", "off")
	params.Set("_cache_size", "-"+strconv.Itoa(connCacheKiB))
	params.Set("_txlock", "immediate")
	// The indexer runs the same few statements a batch: kept prepared.
	params.Set("_stmt_cache_size", strconv.Itoa(ReadStmtCache))
	// Set before the journal mode, on a new file only: the pages the
	// indexes free go back to the file system (giveBack).
	params.Set("_auto_vacuum", "incremental")
	db, err := sql.Open(DriverName, "file:"+sp+"?"+params.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	s := &searchIndex{path: sp, db: db, log: log, batch: searchBatch, keep: giveBackPages, progress: make(chan struct{}), wake: make(chan struct{}, 1), suspect: make(chan error, 1), hurry: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if s.conn, err = db.Conn(ctx); err != nil { // its pragmas run: the search file's alone
		db.Close()
		if damaged(err) {
			err = &searchDamaged{err}
		}
		return nil, fmt.Errorf("search file %s: %w", sp, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("search file %s: %w", sp, err)
	}
	// The search file's own first (its state's page read too: a file
	// damaged past its header is found here, before the store's
	// connections attach it), then the store's file attached.
	for _, q := range []string{searchStateTable, `SELECT COUNT(*) FROM main.search_state`} {
		if _, err := s.conn.ExecContext(ctx, q); err != nil {
			s.close()
			if damaged(err) {
				err = &searchDamaged{err}
			}
			return nil, fmt.Errorf("search file %s: %w", sp, err)
		}
	}
	store := url.URL{Scheme: "file", Path: abs, RawQuery: "mode=ro"}
	if _, err := s.conn.ExecContext(ctx, `ATTACH DATABASE `+quoteLiteral(store.String())+` AS store`); err != nil {
		s.close()
		return nil, fmt.Errorf("search file %s: %w", sp, err)
	}
	return s, nil
}

// TextIndex reports the search file's size on disk (with its log), how
// many dead letters it is behind the database (those the database's
// last commit logged against those the search file's last commit
// applied, read in one snapshot of both: every process's filings and
// indexers counted), and whether this process's indexer is failing: for
// the metrics.
func (d *Store) TextIndex(ctx context.Context) (broker.TextIndexState, error) {
	s := d.search
	var st broker.TextIndexState
	for _, f := range []string{s.path, s.path + "-wal"} {
		fi, err := os.Stat(f)
		if err == nil {
			st.Bytes += fi.Size()
		} else if !errors.Is(err, os.ErrNotExist) {
			return st, fmt.Errorf("search file: %w", err)
		}
	}
	var assigned int64
	var applied sql.NullInt64
	err := d.read.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM main.sqlite_sequence WHERE name = 'text_index_added'), 0),
		(SELECT added_applied FROM search.search_state WHERE id = 1)`).Scan(&assigned, &applied)
	if err != nil || !applied.Valid {
		// The search file cannot be read (damaged, its state gone: its
		// indexer fails too): this process's own account of it.
		err = d.read.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM main.sqlite_sequence WHERE name = 'text_index_added'), 0)`).Scan(&assigned)
		applied = sql.NullInt64{Int64: s.added.Load(), Valid: true}
	}
	if err != nil {
		return st, fmt.Errorf("search file: how far its indexes are: %w", unavailable(err))
	}
	st.Behind = max(0, assigned-applied.Int64)
	st.Failing = s.failure.Load() != nil
	return st, nil
}

// searchStateTable is what the search file knows of the store's file:
// its search_uid, and of each log the last row applied and the last row
// the snapshot it was applied from held.
const searchStateTable = `CREATE TABLE IF NOT EXISTS main.search_state (
	id              INTEGER PRIMARY KEY CHECK (id = 1),
	version         INTEGER NOT NULL,
	main_uid        TEXT NOT NULL,
	added_applied   INTEGER NOT NULL,
	removed_applied INTEGER NOT NULL,
	added_seen      INTEGER NOT NULL,
	removed_seen    INTEGER NOT NULL
) STRICT`

// quoteLiteral is s as an SQL string literal (a file path: ATTACH takes
// a bound parameter too, but a literal keeps the statement one text).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// attachSearch attaches, on a new connection c of the store's file, the
// search file beside it as search, read-only, when there is one (openSearchFile made
// it, before the store's connections open); a connection of a search
// file itself attaches nothing.
func attachSearch(c *sqlite3.SQLiteConn) error {
	rows, err := c.Query(`PRAGMA database_list`, nil)
	if err != nil {
		return fmt.Errorf("sqlite: database_list: %w", err)
	}
	var file string
	dest := make([]driver.Value, 3)
	for {
		if err := rows.Next(dest); err != nil {
			if !errors.Is(err, io.EOF) {
				rows.Close()
				return fmt.Errorf("sqlite: database_list: %w", err)
			}
			break
		}
		if name, _ := dest[1].(string); name == "main" {
			file, _ = dest[2].(string)
		}
	}
	rows.Close()
	if file == "" || strings.HasSuffix(file, searchSuffix) {
		return nil
	}
	if _, err := os.Stat(searchPath(file)); err != nil {
		return nil
	}
	// Read-only: a write transaction of the store's begins IMMEDIATE,
	// which takes the write lock of every database of its connection
	// that can be written, and would hold the indexer back (and wait
	// for it). A read-only one it only reads.
	u := url.URL{Scheme: "file", Path: searchPath(file), RawQuery: "mode=ro"}
	// A file that cannot be attached is left out here: the store's
	// open checks that its connections have it (checkAttached), and a
	// store that could not open its own file (unwritable) says so rather
	// than this.
	c.Exec(`ATTACH DATABASE `+quoteLiteral(u.String())+` AS search`, nil)
	return nil
}

// checkAttached checks that the store's connections have the search
// file attached (attachSearch).
func (s *searchIndex) checkAttached(ctx context.Context, pools ...*sql.DB) error {
	if s == nil {
		return nil
	}
	for _, p := range pools {
		var n int
		if err := p.QueryRowContext(ctx, `SELECT COUNT(*) FROM search.search_state`).Scan(&n); err != nil {
			return fmt.Errorf("search file %s: the database's connections cannot read it: %w", s.path, err)
		}
	}
	return nil
}

// The search file's indexes: made anew (create), filled from the dead
// letters (fill), and a log row's dead letters brought in line (apply).
const (
	searchCreateErrors   = `CREATE VIRTUAL TABLE main.dead_letter_errors USING fts4(error, tokenize=unicode61 "tokenchars=_-", order=DESC)`
	searchCreatePayloads = `CREATE VIRTUAL TABLE main.dead_letter_payloads USING fts4(text, tokenize=unicode61 "tokenchars=_-", order=DESC)`
	searchFillErrors     = `INSERT INTO main.dead_letter_errors (docid, error) SELECT id, error FROM store.dead_letters`
	searchFillPayloads   = `INSERT INTO main.dead_letter_payloads (docid, text) SELECT m.seq, ` + payloadWords + `
		FROM (SELECT d.seq, COALESCE((SELECT x.payload FROM store.messages x WHERE x.seq = d.seq), MAX(d.payload)) AS payload
			FROM store.dead_letters d GROUP BY d.seq) m WHERE m.payload IS NOT NULL`
	// ?1: the ids of a batch of log rows (JSON); the error texts of
	// those gone leave, those there and not indexed come in.
	searchDropErrors = `DELETE FROM main.dead_letter_errors WHERE docid IN (
		SELECT k.value FROM json_each(?1) k WHERE NOT EXISTS (SELECT 1 FROM store.dead_letters d WHERE d.id = k.value))`
	searchAddErrors = `INSERT INTO main.dead_letter_errors (docid, error)
		SELECT d.id, d.error FROM json_each(?1) k CROSS JOIN store.dead_letters d ON d.id = k.value
		WHERE NOT EXISTS (SELECT 1 FROM main.dead_letter_errors e WHERE e.docid = d.id)`
	// ?1: their seqs; a message's payload is indexed once while any
	// dead letter of it is there (the message's, or, once retention
	// removed the message, a dead letter's own copy: migration 0020).
	searchDropPayloads = `DELETE FROM main.dead_letter_payloads WHERE docid IN (
		SELECT k.value FROM json_each(?1) k WHERE NOT EXISTS (SELECT 1 FROM store.dead_letters d WHERE d.seq = k.value))`
	searchAddPayloads = `INSERT INTO main.dead_letter_payloads (docid, text) SELECT m.seq, ` + payloadWords + `
		FROM (SELECT k.value AS seq, COALESCE((SELECT x.payload FROM store.messages x WHERE x.seq = k.value),
				(SELECT MAX(o.payload) FROM store.dead_letters o WHERE o.seq = k.value)) AS payload
			FROM json_each(?1) k
			WHERE EXISTS (SELECT 1 FROM store.dead_letters d WHERE d.seq = k.value)
				AND NOT EXISTS (SELECT 1 FROM main.dead_letter_payloads p WHERE p.docid = k.value)) m
		WHERE m.payload IS NOT NULL`
)

// logState is what the store's file has of a log, read in a
// transaction of the search file: the last row it assigned (its
// sqlite_sequence: AUTOINCREMENT) and the last row deleted as applied.
type logState struct{ assigned, trimmed int64 }

// readLogs reads the store's search_uid and logs from tx's snapshot.
func readLogs(ctx context.Context, tx *sql.Tx) (uid string, logs [2]logState, err error) {
	if err = tx.QueryRowContext(ctx, `SELECT value FROM store.settings WHERE key = 'search_uid'`).Scan(&uid); err != nil {
		return "", logs, fmt.Errorf("read the database's search_uid: %w", err)
	}
	for i, t := range logTables {
		var first sql.NullInt64
		if err = tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT seq FROM store.sqlite_sequence WHERE name = ?), 0),
			(SELECT MIN(id) FROM store.`+t+`)`, t).Scan(&logs[i].assigned, &first); err != nil {
			return "", logs, fmt.Errorf("read the log %s: %w", t, err)
		}
		logs[i].trimmed = logs[i].assigned // every row assigned was applied and deleted
		if first.Valid {
			logs[i].trimmed = first.Int64 - 1
		}
	}
	return uid, logs, nil
}

// beginWithLogs begins a transaction of the indexer (writeTx) and reads
// the store's search_uid and logs in it (prepare's and rebuild's start);
// s.txMu is held.
func (s *searchIndex) beginWithLogs(ctx context.Context) (*sql.Tx, string, [2]logState, error) {
	tx, err := s.writeTx(ctx)
	if err != nil {
		return nil, "", [2]logState{}, fmt.Errorf("search file: %w", err)
	}
	uid, logs, err := readLogs(ctx, tx)
	if err != nil {
		tx.Rollback()
		return nil, "", logs, fmt.Errorf("search file: %w", err)
	}
	return tx, uid, logs, nil
}

// prepare checks that the search file belongs to the store's file as it
// stands (its layout, search_uid, and of each log the rows it applied
// and saw against those the store's file has and has deleted) and builds
// it again when not. It runs as the store opens, before the store's
// writer starts.
func (s *searchIndex) prepare(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.txMu.Lock()
	defer s.txMu.Unlock()
	tx, uid, logs, err := s.beginWithLogs(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int64
	var owner string
	var applied, seen [2]int64
	err = tx.QueryRowContext(ctx, `SELECT version, main_uid, added_applied, removed_applied, added_seen, removed_seen
		FROM main.search_state WHERE id = 1`).Scan(&version, &owner, &applied[0], &applied[1], &seen[0], &seen[1])
	var tables int
	if err == nil {
		err = tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM main.sqlite_master WHERE name IN ('dead_letter_errors', 'dead_letter_payloads')`).Scan(&tables)
	}
	why := ""
	switch {
	case errors.Is(err, sql.ErrNoRows):
		why = "it is new"
	case err != nil:
		why = "its layout is of another version (" + err.Error() + ")"
	case version != searchVersion || tables != 2:
		why = "its layout is of another version"
	case owner != uid:
		why = "it belongs to another database"
	}
	for i := range logs {
		if why == "" && !(logs[i].trimmed <= applied[i] && applied[i] <= seen[i] && seen[i] <= logs[i].assigned) {
			why = fmt.Sprintf("it is out of step with the database's %s (it applied up to row %d of %d seen; the database has rows %d to %d)",
				logTables[i], applied[i], seen[i], logs[i].trimmed+1, logs[i].assigned)
		}
	}
	if why == "" {
		for i := range logs {
			s.applied[i].Store(applied[i])
			s.trimmed[i] = logs[i].trimmed
		}
		s.added.Store(applied[logAdded])
		return tx.Commit()
	}
	start := time.Now()
	if err := s.fill(ctx, tx, uid, logs); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("search file: build: %w", err)
	}
	for i := range logs {
		s.applied[i].Store(logs[i].assigned)
		s.trimmed[i] = logs[i].trimmed
	}
	s.added.Store(logs[logAdded].assigned)
	s.log.Info("search file built from the dead letters", "file", s.path, "why", why, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// fill makes the indexes anew from the dead letters as tx's snapshot of
// the store's file has them, every row of its logs applied.
func (s *searchIndex) fill(ctx context.Context, tx *sql.Tx, uid string, logs [2]logState) error {
	for _, q := range []string{
		`DROP TABLE IF EXISTS main.search_state`,
		searchStateTable,
		`DROP TABLE IF EXISTS main.dead_letter_errors`,
		`DROP TABLE IF EXISTS main.dead_letter_payloads`,
		searchCreateErrors,
		searchCreatePayloads,
		searchFillErrors,
		searchFillPayloads,
		`INSERT INTO main.dead_letter_errors (dead_letter_errors) VALUES ('optimize')`,
		`INSERT INTO main.dead_letter_payloads (dead_letter_payloads) VALUES ('optimize')`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("search file: build: %w", err)
		}
	}
	a, r := logs[logAdded].assigned, logs[logRemoved].assigned
	if _, err := tx.ExecContext(ctx, `INSERT INTO main.search_state (id, version, main_uid, added_applied, removed_applied, added_seen, removed_seen)
		VALUES (1, ?, ?, ?, ?, ?, ?)`, searchVersion, uid, a, r, a, r); err != nil {
		return fmt.Errorf("search file: build: %w", err)
	}
	return nil
}

// ExecSearchUncatalogued runs one statement of a test's own on the
// search file (the store's file attached as store), between the
// indexer's transactions: for tests that change the indexes behind the
// store's back (ExecUncatalogued's sibling; the store's own connections
// attach the search file read-only).
func (d *Store) ExecSearchUncatalogued(ctx context.Context, query string, args ...any) (sql.Result, error) {
	d.search.txMu.Lock()
	defer d.search.txMu.Unlock()
	return d.search.conn.ExecContext(ctx, query, args...)
}

// rebuild builds the indexes again from the dead letters, whatever they
// hold (RebuildTextIndex).
func (s *searchIndex) rebuild(ctx context.Context) error {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	tx, uid, logs, err := s.beginWithLogs(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.fill(ctx, tx, uid, logs); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("search file: build: %w", err)
	}
	for i := range logs {
		s.applied[i].Store(logs[i].assigned)
	}
	s.advance(logs[logAdded].assigned)
	return nil
}

// start runs the indexer until close.
func (s *searchIndex) start() {
	s.started = true
	go s.run()
}

// run applies the log as it grows (woken by the writer's commits that
// logged rows, searchLinger later unless a read hurries it, and every
// s.tick), then merges the indexes' segments a step at a time.
func (s *searchIndex) run() {
	defer close(s.done)
	tick := time.NewTicker(s.tick)
	defer tick.Stop()
	linger := time.NewTimer(s.linger)
	linger.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	fails := 0
	var mine *string // the failure this loop said last
	for {
		select {
		case <-s.stop:
			return
		case <-s.hurry:
		case <-s.wake:
			linger.Reset(s.linger)
			select {
			case <-s.stop:
				return
			case <-s.hurry:
			case <-linger.C:
			}
			linger.Stop()
		case <-tick.C:
		case err := <-s.suspect:
			s.damage(ctx, err, true)
			continue
		}
		// What called it before now is in catchUp's snapshot, which
		// begins after: no call is left for a round that would find
		// nothing.
		for _, ch := range []chan struct{}{s.wake, s.hurry} {
			select {
			case <-ch:
			default:
			}
		}
		err := s.catchUp(ctx)
		if err == nil {
			// Merging and giving pages back may fail (another process's
			// indexer beside: SQLite's busy) without the indexes falling
			// behind: logged, tried again at the next tick, not a
			// failure the reads give up on.
			if merr := errors.Join(s.merge(ctx), s.giveBack(ctx)); merr != nil && ctx.Err() == nil && !s.damage(ctx, merr, true) {
				s.log.Warn("search file: merge the indexes or give pages back (tried again)", "file", s.path, "err", merr)
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			fails++
			if s.damageNoted.Load() || s.damage(ctx, err, fails == 1 || fails%60 == 0) {
				continue // failing for good, said once
			}
			msg := err.Error()
			mine = &msg
			s.failure.Store(mine)
			s.notify() // the reads waiting give up
			if fails == 1 || fails%60 == 0 {
				s.log.Error("search file: the indexes could not be brought up to date (searches wait for them)", "file", s.path, "fails", fails, "err", err)
			}
			continue
		}
		if fails > 0 && s.failure.CompareAndSwap(mine, nil) { // not damage's, said meanwhile
			s.log.Info("search file: the indexes are up to date again", "file", s.path, "after_fails", fails)
		}
		fails = 0
	}
}

// catchUp applies the logs' rows past those applied, a batch a
// transaction, until a round finds less than a full batch of either
// (rows logged since woke the indexer again): each round the additions
// that are due (up to a batch), then, when the snapshot of the
// additions' batch saw any, a batch of removals, so that a search waits
// for at most a batch of removals and removals are never put off by
// steady filing. Between the batches it merges the indexes' segments
// that became due (mergeSteps), so that no batch's commit merges a
// whole level of a backlog's segments.
func (s *searchIndex) catchUp(ctx context.Context) error {
	for {
		added, err := s.applyBatch(ctx, logAdded)
		if err != nil {
			return err
		}
		removed := 0
		if s.pending[logRemoved] {
			if removed, err = s.applyBatch(ctx, logRemoved); err != nil {
				return err
			}
		}
		if added+removed == 0 {
			return nil
		}
		if err := s.mergeSteps(ctx); err != nil && ctx.Err() == nil {
			// Not the log's failure: the reads need not give up (run).
			s.log.Warn("search file: merge the indexes (tried again)", "file", s.path, "err", err)
		}
		if added < s.batch && removed < s.batch {
			return nil
		}
	}
}

// applyStatements bring a batch's dead letters in line, by log (?1:
// their ids, then their messages' seqs, as JSON).
var applyStatements = [2][2]string{
	logAdded:   {searchAddErrors, searchAddPayloads},
	logRemoved: {searchDropErrors, searchDropPayloads},
}

// applyBatch applies up to s.batch rows of log l in one transaction of
// the search file, which records the last, and the last row of each log
// its snapshot of the store's file holds (seen), and returns how many it
// applied.
func (s *searchIndex) applyBatch(ctx context.Context, l int) (int, error) {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	tx, err := s.writeTx(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var applied, seen [2]int64
	if err := tx.QueryRowContext(ctx, `SELECT added_applied, removed_applied, added_seen, removed_seen FROM main.search_state WHERE id = 1`).Scan(&applied[0], &applied[1], &seen[0], &seen[1]); err != nil {
		return 0, fmt.Errorf("read how far the indexes are: %w", err)
	}
	// Another process's indexer (a command beside the server) may have
	// applied rows: the reads waiting on this one learn it.
	s.advance(applied[logAdded])
	s.applied[logRemoved].Store(applied[logRemoved])
	_, logs, err := readLogs(ctx, tx)
	if err != nil {
		return 0, err
	}
	for i := range logs {
		s.pending[i] = logs[i].assigned > applied[i]
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, dead_letter_id, seq FROM store.`+logTables[l]+` WHERE id > ? ORDER BY id LIMIT ?`, applied[l], s.batch)
	if err != nil {
		return 0, fmt.Errorf("read the log: %w", err)
	}
	var ids, seqs []int64
	seenID, seenSeq := map[int64]bool{}, map[int64]bool{}
	last, n := applied[l], 0
	for rows.Next() {
		var id, dl, seq int64
		if err := rows.Scan(&id, &dl, &seq); err != nil {
			rows.Close()
			return 0, fmt.Errorf("read the log: %w", err)
		}
		last, n = id, n+1
		if !seenID[dl] {
			seenID[dl] = true
			ids = append(ids, dl)
		}
		if !seenSeq[seq] {
			seenSeq[seq] = true
			seqs = append(seqs, seq)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, fmt.Errorf("read the log: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	for i, arg := range []string{sqlcore.IntsJSON(ids), sqlcore.IntsJSON(seqs)} {
		if _, err := tx.ExecContext(ctx, applyStatements[l][i], arg); err != nil {
			return 0, fmt.Errorf("apply the log: %w", err)
		}
	}
	applied[l] = last
	if _, err := tx.ExecContext(ctx, `UPDATE main.search_state SET added_applied = ?, removed_applied = ?, added_seen = ?, removed_seen = ? WHERE id = 1`,
		applied[logAdded], applied[logRemoved], max(seen[logAdded], logs[logAdded].assigned), max(seen[logRemoved], logs[logRemoved].assigned)); err != nil {
		return 0, fmt.Errorf("apply the log: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("apply the log: %w", err)
	}
	s.applied[l].Store(last)
	s.commits.Add(1)
	if l == logAdded {
		s.advance(last)
	} else {
		s.notify()
	}
	return n, nil
}

// writeTx begins a transaction of the indexer that holds the search
// file's write lock from its start (waiting for it up to the busy
// timeout, when another process's indexer holds it: a command run beside
// the server), so that what it then reads of either file is not a
// snapshot that a write of the other indexer made stale (which SQLite
// would refuse to write on). The store's file, attached read-only, it
// only reads: BEGIN IMMEDIATE takes no lock of it.
//
// The transaction is begun on a context that the indexer's stop does not
// cancel: database/sql discards the connection of a transaction whose
// own context ends, in a goroutine of its own, and this is the indexer's
// one connection, which Close still uses after the indexer stopped
// (detachStore: the discard raced it and panicked in a full run). Its
// statements take ctx, which interrupts them; the transaction is then
// rolled back by its caller.
func (s *searchIndex) writeTx(ctx context.Context) (*sql.Tx, error) {
	return s.conn.BeginTx(context.WithoutCancel(ctx), nil) // BEGIN IMMEDIATE (the DSN's _txlock)
}

// advance records that the indexes hold every addition up to added,
// and wakes the reads waiting for them.
func (s *searchIndex) advance(added int64) {
	if added <= s.added.Load() {
		return
	}
	s.added.Store(added)
	s.notify()
}

// notify wakes whoever waits for the indexer's progress.
func (s *searchIndex) notify() {
	s.mu.Lock()
	close(s.progress)
	s.progress = make(chan struct{})
	s.mu.Unlock()
}

// merge merges the indexes' segments a bounded step a transaction
// (mergeStep), until none is due: each filed or removed batch adds a
// segment to each index, and FTS4 would otherwise merge a full level in
// one commit, holding the next batch, and the searches waiting for it,
// back.
func (s *searchIndex) merge(ctx context.Context) error {
	for steps := 0; steps < 10_000; steps++ {
		more, err := s.mergeStep(ctx, textMergePages)
		if err != nil || !more {
			return err
		}
		select {
		case <-s.wake:
			// Rows to apply come first: a read may wait for them.
			if err := s.catchUp(ctx); err != nil {
				return err
			}
		default:
		}
	}
	return nil
}

// mergeSteps runs merge steps until none is due (or 10,000 were run).
func (s *searchIndex) mergeSteps(ctx context.Context) error {
	for steps := 0; steps < 10_000; steps++ {
		more, err := s.mergeStep(ctx, textMergePages)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// mergeStep runs one step of merging of the first index with merging due
// (about pages pages written), and reports whether any is still due.
func (s *searchIndex) mergeStep(ctx context.Context, pages int) (bool, error) {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	// Deferred, not writeTx's IMMEDIATE: a step reads and writes the
	// search file only, and must hold no snapshot of the store's file
	// (BEGIN IMMEDIATE would begin one: it begins a transaction on every
	// database of the connection), which would keep the store's
	// checkpoints from reaching the end of its write-ahead log.
	var more bool
	err := s.deferred(ctx, func() (err error) {
		more, err = mergeTextIndex(ctx, s.conn, pages)
		return err
	})
	return more, err
}

// deferred runs fn in a transaction of the indexer's connection begun
// DEFERRED, which takes no lock, and no snapshot, of a database before
// a statement reads or writes it (mergeStep, giveBackStep: they touch
// the search file only); committed when fn succeeds, else rolled back.
func (s *searchIndex) deferred(ctx context.Context, fn func() error) error {
	if _, err := s.conn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		return err
	}
	err := fn()
	end := `COMMIT`
	if err != nil {
		end = `ROLLBACK`
	}
	if _, eerr := s.conn.ExecContext(context.WithoutCancel(ctx), end); err == nil && eerr != nil {
		s.conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
		return eerr
	}
	return err
}

// giveBackPages is how many free pages the search file keeps before
// the indexer gives them back to the file system, and gives back at
// most at once (a step a transaction, as the store's space task does).
const giveBackPages = 1024

// giveBack gives the search file's free pages back to the file system
// (incremental_vacuum), a bounded step a transaction, once it holds
// s.keep of them, until it holds fewer: a replay that removes many dead
// letters frees their entries' pages as the indexer merges them.
func (s *searchIndex) giveBack(ctx context.Context) error {
	// Rows to apply come first (run): a call waiting ends it (not for a
	// test's manual indexer, which no call reaches).
	for !s.started || len(s.wake) == 0 {
		more, err := s.giveBackStep(ctx)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// giveBackStep gives back up to 4·s.keep free pages, and reports
// whether it gave back any.
func (s *searchIndex) giveBackStep(ctx context.Context) (bool, error) {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	var free, mode int64
	if err := s.conn.QueryRowContext(ctx, `PRAGMA main.freelist_count`).Scan(&free); err != nil || free < s.keep {
		return false, err
	}
	// A search file made without incremental auto_vacuum (before it was
	// asked for) keeps its free pages for reuse: nothing to give back.
	if err := s.conn.QueryRowContext(ctx, `PRAGMA main.auto_vacuum`).Scan(&mode); err != nil || mode != autoVacuumIncremental {
		return false, err
	}
	// Deferred, as mergeStep: no snapshot of the store's file held.
	// Through a small cache of pages, as an export reads (ReadOnce): the
	// pages it moves are each touched once, and the connection's usual
	// cache kept them (bench's S3: giving back 23,499 free pages at the
	// server's start left 15 MB cached, and malloc's arena 35 MB bigger).
	exec := func(ctx context.Context, q string) error {
		_, err := s.conn.ExecContext(ctx, q)
		return err
	}
	err := s.deferred(ctx, func() error {
		return throughSmallCache(ctx, exec, "main.", func() error {
			rows, err := s.conn.QueryContext(ctx, `PRAGMA main.incremental_vacuum(`+strconv.FormatInt(s.keep*4, 10)+`)`)
			if err != nil {
				return err
			}
			for rows.Next() {
			}
			return errors.Join(rows.Err(), rows.Close())
		})
	})
	if err != nil {
		return false, fmt.Errorf("give the search file's free pages back: %w", err)
	}
	return true, nil
}

// await returns once the indexes hold every addition that t's snapshot
// of the store's file holds (AwaitTextIndex), whichever process filed
// it; it comes before t's first read of the search file, so what t
// then reads of it is at least that new. While the indexer is failing
// it fails at once rather than hold the read's connection, and so does
// a read that would wait beside maxWaiting others.
func (s *searchIndex) await(ctx context.Context, t *sqlcore.Tx) error {
	var target int64
	if err := t.QueryRow(ctx, `SELECT COALESCE((SELECT seq FROM main.sqlite_sequence WHERE name = 'text_index_added'), 0)`).Scan(&target); err != nil {
		return fmt.Errorf("the text index's log: %w", err)
	}
	if s.added.Load() >= target {
		return nil
	}
	behind := func(after string) error {
		why := ""
		if f := s.failure.Load(); f != nil {
			why = ": " + *f
		}
		return fmt.Errorf("%w: the search index is %d dead letters behind%s%s", broker.ErrUnavailable, target-s.added.Load(), after, why)
	}
	if s.failure.Load() != nil {
		return behind("")
	}
	// Each read waits on its connection of the pool: past maxWaiting of
	// them, the others (pages, the API's reads) would wait for one.
	if n := s.waiting.Add(1); n > maxWaiting {
		s.waiting.Add(-1)
		return behind(fmt.Sprintf(", and %d searches wait for it already: try again in a moment", n-1))
	}
	defer s.waiting.Add(-1)
	s.hurryUp()
	timer := time.NewTimer(searchWait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		ch := s.progress
		s.mu.Unlock()
		if s.added.Load() >= target {
			return nil
		}
		if s.failure.Load() != nil {
			return behind("")
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stop:
			return fmt.Errorf("%w: the database is closing", broker.ErrUnavailable)
		case <-timer.C:
			return behind(" after " + searchWait.String())
		}
	}
}

// kick wakes the indexer: rows were logged (it lingers for more).
func (s *searchIndex) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// hurryUp wakes the indexer at once: a read waits for it. It calls
// wake too, which a merge under way looks at between its steps.
func (s *searchIndex) hurryUp() {
	select {
	case s.hurry <- struct{}{}:
	default:
	}
	s.kick()
}

// halt stops the indexer, and the reads waiting for it.
func (s *searchIndex) halt() {
	if s == nil {
		return
	}
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	if s.started {
		<-s.done
	}
}

// detachStore lets go of the store's file on the indexer's connection
// (Close: see there), once the indexer has stopped.
func (s *searchIndex) detachStore() {
	if s == nil || s.conn == nil {
		return
	}
	if _, err := s.conn.ExecContext(context.Background(), `DETACH DATABASE store`); err != nil {
		s.log.Warn("search file: let go of the database", "err", err)
	}
}

// close stops the indexer and closes the search file.
func (s *searchIndex) close() error {
	if s == nil {
		return nil
	}
	s.halt()
	var err error
	if s.conn != nil {
		err = s.conn.Close()
	}
	return errors.Join(err, s.db.Close())
}

// The writer's side (its goroutine alone).

// noteLogged marks that the writer's transaction logged rows.
func (s *searchIndex) noteLogged() {
	if s != nil {
		s.dirty = true
	}
}

// beforeCommit runs in the writer's transaction before its COMMIT: the
// deletion of a bounded few of each log's rows the indexer has applied.
func (s *searchIndex) beforeCommit(ctx context.Context, st *sqlcore.Tx) error {
	if s == nil {
		return nil
	}
	s.trimTo = [2]int64{-1, -1}
	if time.Since(s.trimmedAt) < trimEvery {
		return nil
	}
	for i, t := range logTables {
		if applied := s.applied[i].Load(); applied > s.trimmed[i] {
			to := min(applied, s.trimmed[i]+trimRows)
			if _, err := st.Exec(ctx, `DELETE FROM `+t+` WHERE id <= ?`, to); err != nil {
				return fmt.Errorf("the text index's log: %w", err)
			}
			s.trimTo[i] = to
		}
	}
	return nil
}

// afterCommit records what the committed transaction deleted, and wakes
// the indexer for the rows it logged.
func (s *searchIndex) afterCommit() {
	if s == nil {
		return
	}
	if s.dirty {
		s.dirty = false
		s.kick()
	}
	for i, to := range s.trimTo {
		if to >= 0 {
			s.trimmed[i], s.trimmedAt = to, time.Now()
		}
	}
}
