package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-sqlite3"
	"maragu.dev/goqite"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db"
)

// sqliteSettings are the pragmas db.Open gives its connections, read back
// from a database it opened, so that the references get the same ones
// whatever db.Open comes to set.
type sqliteSettings struct {
	version     string
	journalMode string
	cacheSize   int
	busyTimeout int
	foreignKeys int
	// conn is what db's driver sets on every connection and a DSN cannot
	// carry: the query planner stability guarantee and temp_store.
	conn connSettings
}

// refDriver is the driver the references open: plain go-sqlite3, plus
// the settings of ours that a DSN cannot carry (QPSG, temp_store), set on
// each connection as db.Open's driver does. probeSettings registers it,
// with the values it read from ours, and checks them on a reference
// connection.
const refDriver = "sqlite3-ref"

var registerRef sync.Once

func registerRefDriver(s connSettings) {
	registerRef.Do(func() {
		sql.Register(refDriver, &sqlite3.SQLiteDriver{ConnectHook: refConnectHook(s)})
	})
}

// probeSettings opens a database with db.Open and reads its pragmas, then
// opens a reference database next to it and checks that it has the same
// (an error if not: a reference that lost one would be measured on other
// terms than ours).
func probeSettings(ctx context.Context, path string, sync db.Sync) (sqliteSettings, error) {
	var s sqliteSettings
	d, err := db.Open(ctx, path, sync)
	if err != nil {
		return s, fmt.Errorf("probe: %w", err)
	}
	defer d.Close()
	w := d.WriteDB()
	var syncVal int
	for _, q := range []struct {
		sql string
		dst any
	}{
		{"SELECT sqlite_version()", &s.version},
		{"PRAGMA journal_mode", &s.journalMode},
		{"PRAGMA cache_size", &s.cacheSize},
		{"PRAGMA busy_timeout", &s.busyTimeout},
		{"PRAGMA foreign_keys", &s.foreignKeys},
		{"PRAGMA synchronous", &syncVal},
	} {
		if err := w.QueryRowContext(ctx, q.sql).Scan(q.dst); err != nil {
			return s, fmt.Errorf("probe %s: %w", q.sql, err)
		}
	}
	if want := syncValue(sync); syncVal != want {
		return s, fmt.Errorf("probe: db.Open(%s) gave synchronous=%d", sync, syncVal)
	}
	if s.conn, err = readConnSettings(ctx, w); err != nil {
		return s, fmt.Errorf("probe: %w", err)
	}
	// The writer keeps its statements prepared in a cache of its own
	// (db/sqlite/raw.go), beneath go-sqlite3's; the readers in
	// go-sqlite3's, of db.ReadStmtCache statements (the test of
	// db/sqlite reads it back from a reader). A reference's one
	// connection gets go-sqlite3's of that size.
	if s.conn.stmtCache != 0 {
		return s, fmt.Errorf("probe: the writer's handle has a go-sqlite3 statement cache of %d; expected its own (db/sqlite/raw.go)", s.conn.stmtCache)
	}
	s.conn.stmtCache = db.ReadStmtCache
	registerRefDriver(s.conn)
	if err := s.checkRef(ctx, path+"-ref", sync); err != nil {
		return s, fmt.Errorf("probe: %w", err)
	}
	return s, nil
}

// checkRef opens a reference database at path and compares its settings
// with ours.
func (s sqliteSettings) checkRef(ctx context.Context, path string, sync db.Sync) error {
	r, err := sql.Open(refDriver, s.refDSN(path, sync))
	if err != nil {
		return err
	}
	defer r.Close()
	got, err := readConnSettings(ctx, r)
	if err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	if got != s.conn {
		return fmt.Errorf("a reference connection has QPSG %d, temp_store %d, its own mutex %d, a statement cache of %d; ours QPSG %d, temp_store %d, its own mutex %d, a statement cache of %d",
			got.qpsg, got.tempStore, got.mutex, got.stmtCache, s.conn.qpsg, s.conn.tempStore, s.conn.mutex, s.conn.stmtCache)
	}
	var journal string
	var cache, busy, fk, syncVal int
	if err := r.QueryRowContext(ctx, "SELECT * FROM pragma_journal_mode(), pragma_cache_size(), pragma_busy_timeout(), pragma_foreign_keys(), pragma_synchronous()").Scan(&journal, &cache, &busy, &fk, &syncVal); err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	if journal != s.journalMode || cache != s.cacheSize || busy != s.busyTimeout || fk != s.foreignKeys || syncVal != syncValue(sync) {
		return fmt.Errorf("a reference connection has journal_mode %s, cache_size %d, busy_timeout %d, foreign_keys %d, synchronous %d; ours %s, %d, %d, %d, %d",
			journal, cache, busy, fk, syncVal, s.journalMode, s.cacheSize, s.busyTimeout, s.foreignKeys, syncValue(sync))
	}
	return nil
}

func syncValue(s db.Sync) int {
	if s == db.SyncFull {
		return 2
	}
	return 1
}

// refDSN is the go-sqlite3 DSN of a reference database: the pragmas of
// ours, our readers' statement cache, and BEGIN IMMEDIATE like our
// writer, so that concurrent callers queue for the write lock rather
// than fail on upgrading it.
func (s sqliteSettings) refDSN(path string, sync db.Sync) string {
	p := url.Values{}
	p.Set("_journal_mode", s.journalMode)
	p.Set("_synchronous", string(sync))
	p.Set("_busy_timeout", strconv.Itoa(s.busyTimeout))
	p.Set("_foreign_keys", map[bool]string{true: "on", false: "off"}[s.foreignKeys != 0])
	p.Set("_cache_size", strconv.Itoa(s.cacheSize))
	p.Set("_txlock", "immediate")
	p.Set("_mutex", map[bool]string{true: "full", false: "no"}[s.conn.mutex == 1])
	if s.conn.stmtCache > 0 {
		p.Set("_stmt_cache_size", strconv.Itoa(s.conn.stmtCache))
	}
	return "file:" + path + "?" + p.Encode()
}

// openRef opens a reference database with one connection, like our
// writer.
func (e *env) openRef(ctx context.Context, path string, sync db.Sync) (*sql.DB, error) {
	d, err := sql.Open(refDriver, e.settings.refDSN(path, sync))
	if err != nil {
		return nil, err
	}
	d.SetMaxOpenConns(1)
	d.SetMaxIdleConns(1)
	d.SetConnMaxLifetime(0)
	d.SetConnMaxIdleTime(0)
	if err := d.PingContext(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// ours is Lazarus: the broker over db.Open on its own file.
type ours struct {
	db   *db.DB
	b    *broker.Broker
	path string
}

func (e *env) openOurs(ctx context.Context, name string, sync db.Sync) (*ours, error) {
	return e.openOursWith(ctx, name, db.Options{Sync: sync})
}

// openOursWith is openOurs with all of db's options.
func (e *env) openOursWith(ctx context.Context, name string, opts db.Options) (*ours, error) {
	path := e.path(name)
	d, err := db.OpenWith(ctx, path, opts)
	if err != nil {
		removeDB(path)
		return nil, err
	}
	return &ours{db: d, b: broker.New(broker.Config{Store: d}), path: path}, nil
}

// close closes and deletes the database.
func (o *ours) close() {
	o.b.Close()
	o.db.Close()
	removeDB(o.path)
}

const benchQueue = "bench"

// push pushes the payloads in one call to partition part of queue.
func (o *ours) push(ctx context.Context, queue, part string, payloads ...[]byte) error {
	items := make([]broker.PushItem, len(payloads))
	for i, p := range payloads {
		items[i] = broker.PushItem{Queue: queue, Partition: part, Payload: p}
	}
	_, err := o.b.Push(ctx, items)
	return err
}

// ackAll acknowledges every message of a pop as completed, in one batch.
func (o *ours) ackAll(ctx context.Context, group string, res broker.PopResult) error {
	acks := make([]broker.Ack, len(res.Messages))
	for i, m := range res.Messages {
		acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckCompleted, Group: group}
	}
	out, err := o.b.AckBatch(ctx, group, acks)
	if err != nil {
		return err
	}
	for _, r := range out {
		if !r.Success {
			return fmt.Errorf("ack refused: %s", r.Error)
		}
	}
	return nil
}

// consume pops batches of the group until n messages were acknowledged.
func (o *ours) consume(ctx context.Context, queue, group string, batch, n int) error {
	got := 0
	for got < n {
		res, err := o.b.Pop(ctx, broker.PopRequest{Queue: queue, Group: group, Batch: batch})
		if err != nil {
			return err
		}
		if len(res.Messages) == 0 {
			return fmt.Errorf("pop found nothing after %d of %d messages", got, n)
		}
		if err := o.ackAll(ctx, group, res); err != nil {
			return err
		}
		got += len(res.Messages)
	}
	return nil
}

// payload is a message body of about 128 bytes: JSON with its index and
// a time in Unix nanoseconds (latency cases read it back).
func payload(i int, t int64) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"i":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"t":`...)
	b = strconv.AppendInt(b, t, 10)
	b = append(b, `,"customer":"c-`...)
	b = strconv.AppendInt(b, int64(i%977), 10)
	b = append(b, `","amount":`...)
	b = strconv.AppendInt(b, int64(i%10000)*7, 10)
	b = append(b, `,"currency":"EUR","note":"`...)
	for len(b) < 125 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// payloadFields reads the index and the time back from a payload.
func payloadFields(b []byte) (i int, t int64, ok bool) {
	s := string(b)
	num := func(key string) (int64, bool) {
		k := strings.Index(s, `"`+key+`":`)
		if k < 0 {
			return 0, false
		}
		rest := s[k+len(key)+3:]
		end := strings.IndexAny(rest, ",}")
		if end < 0 {
			return 0, false
		}
		v, err := strconv.ParseInt(rest[:end], 10, 64)
		return v, err == nil
	}
	iv, ok1 := num("i")
	t, ok2 := num("t")
	return int(iv), t, ok1 && ok2
}

// rawQueue is the raw reference: one narrow table, one INSERT to push, one
// UPDATE … RETURNING to lease, one DELETE to settle, with prepared
// statements.
type rawQueue struct {
	db    *sql.DB
	path  string
	ins   *sql.Stmt
	lease *sql.Stmt
	del   *sql.Stmt
}

const rawSchema = `CREATE TABLE IF NOT EXISTS q (
	id          INTEGER PRIMARY KEY,
	body        BLOB    NOT NULL,
	lease_until INTEGER NOT NULL DEFAULT 0,
	received    INTEGER NOT NULL DEFAULT 0
) STRICT`

func (e *env) openRaw(ctx context.Context, name string, sync db.Sync) (*rawQueue, error) {
	path := e.path(name)
	d, err := e.openRef(ctx, path, sync)
	if err != nil {
		removeDB(path)
		return nil, err
	}
	r := &rawQueue{db: d, path: path}
	if _, err := d.ExecContext(ctx, rawSchema); err != nil {
		r.close()
		return nil, err
	}
	for _, s := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&r.ins, `INSERT INTO q (body) VALUES (?)`},
		{&r.lease, `UPDATE q SET lease_until = ?1, received = received + 1
			WHERE id IN (SELECT id FROM q WHERE lease_until <= ?2 ORDER BY id LIMIT ?3) RETURNING id, body`},
		{&r.del, `DELETE FROM q WHERE id = ?`},
	} {
		if *s.dst, err = d.PrepareContext(ctx, s.sql); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

func (r *rawQueue) close() {
	for _, s := range []*sql.Stmt{r.ins, r.lease, r.del} {
		if s != nil {
			s.Close()
		}
	}
	r.db.Close()
	removeDB(r.path)
}

// push inserts one message in its own transaction.
func (r *rawQueue) push(ctx context.Context, body []byte) error {
	_, err := r.ins.ExecContext(ctx, body)
	return err
}

// pushBatch inserts the bodies in one transaction.
func (r *rawQueue) pushBatch(ctx context.Context, bodies [][]byte) error {
	return inTx(ctx, r.db, func(tx *sql.Tx) error {
		st := tx.StmtContext(ctx, r.ins)
		for _, b := range bodies {
			if _, err := st.ExecContext(ctx, b); err != nil {
				return err
			}
		}
		return nil
	})
}

// leaseN leases up to n messages in one statement (its own transaction).
func (r *rawQueue) leaseN(ctx context.Context, n int) ([]int64, error) {
	now := time.Now().UnixMilli()
	rows, err := r.lease.QueryContext(ctx, now+30_000, now, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// settle deletes one message in its own transaction.
func (r *rawQueue) settle(ctx context.Context, id int64) error {
	_, err := r.del.ExecContext(ctx, id)
	return err
}

// settleBatch deletes the messages in one transaction.
func (r *rawQueue) settleBatch(ctx context.Context, ids []int64) error {
	return inTx(ctx, r.db, func(tx *sql.Tx) error {
		st := tx.StmtContext(ctx, r.del)
		for _, id := range ids {
			if _, err := st.ExecContext(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
}

func inTx(ctx context.Context, d *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := d.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// goqiteSchema is goqite v0.4.0's schema_sqlite.sql, which the package
// does not create itself (MIT licence, github.com/maragudk/goqite).
const goqiteSchema = `create table goqite (
  id text primary key default ('m_' || lower(hex(randomblob(16)))),
  created text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  updated text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  queue text not null,
  body blob not null,
  timeout text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  received integer not null default 0,
  priority integer not null default 0
) strict;

create trigger goqite_updated_timestamp after update on goqite begin
  update goqite set updated = strftime('%Y-%m-%dT%H:%M:%fZ') where id = old.id;
end;

create index goqite_queue_priority_created_idx on goqite (queue, priority desc, created);`

// goqiteQueue is the goqite reference.
type goqiteQueue struct {
	db   *sql.DB
	q    *goqite.Queue
	path string
}

func (e *env) openGoqite(ctx context.Context, name string, sync db.Sync) (*goqiteQueue, error) {
	path := e.path(name)
	d, err := e.openRef(ctx, path, sync)
	if err != nil {
		removeDB(path)
		return nil, err
	}
	if _, err := d.ExecContext(ctx, goqiteSchema); err != nil {
		d.Close()
		removeDB(path)
		return nil, err
	}
	return &goqiteQueue{db: d, q: goqite.New(goqite.NewOpts{DB: d, Name: benchQueue, Timeout: 30 * time.Second}), path: path}, nil
}

func (g *goqiteQueue) close() {
	g.db.Close()
	removeDB(g.path)
}

// sendBatch sends the bodies in one transaction.
func (g *goqiteQueue) sendBatch(ctx context.Context, bodies [][]byte) error {
	return inTx(ctx, g.db, func(tx *sql.Tx) error {
		for _, b := range bodies {
			if err := g.q.SendTx(ctx, tx, goqite.Message{Body: b}); err != nil {
				return err
			}
		}
		return nil
	})
}

// receiveBatch receives up to n messages in one transaction.
func (g *goqiteQueue) receiveBatch(ctx context.Context, n int) ([]goqite.ID, error) {
	var ids []goqite.ID
	err := inTx(ctx, g.db, func(tx *sql.Tx) error {
		for range n {
			m, err := g.q.ReceiveTx(ctx, tx)
			if err != nil {
				return err
			}
			if m == nil {
				break
			}
			ids = append(ids, m.ID)
		}
		return nil
	})
	return ids, err
}

// deleteBatch deletes the messages in one transaction.
func (g *goqiteQueue) deleteBatch(ctx context.Context, ids []goqite.ID) error {
	return inTx(ctx, g.db, func(tx *sql.Tx) error {
		for _, id := range ids {
			if err := g.q.DeleteTx(ctx, tx, id); err != nil {
				return err
			}
		}
		return nil
	})
}

var errEmpty = errors.New("queue unexpectedly empty")

// bodies makes n payloads starting at index from.
func bodies(from, n int) [][]byte {
	out := make([][]byte, n)
	now := time.Now().UnixNano()
	for i := range out {
		out[i] = payload(from+i, now)
	}
	return out
}
