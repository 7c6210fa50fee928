package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// A write transaction's BEGIN on PostgreSQL goes with its first
// statement: BEGIN, the writer's lock (which reads the cache generation
// once held, migrations_pg/0002 and 0004), an ephemeral write's
// synchronous_commit and the statement, in one round trip (a pipeline),
// rather than one round trip for BEGIN and the lock and one for the
// statement. In a process alone on its database (writer.oneTrip), a
// write none of whose statements is answered before its COMMIT (a push:
// its insert is kept for the COMMIT's round trip, InsertMessagesLate)
// sends its BEGIN with its COMMIT, when no other write waits to join
// it: one round trip, BEGIN, lock, insert, ready mark and COMMIT.
// Beside other processes, whose locks it may wait for, BEGIN goes
// first, under the caller's context (lead). A lease or an ack is three
// round trips (four for a lease beside other processes: its consumer
// is locked in a statement of its own).
//
// The broker looks its queues, partitions and groups up in its cache
// before the first statement, while the generation that says whether
// another process changed them is read only with it. So the lock's
// statement is given the generation this process has seen, and fails
// when it moved (lazarus_write_lock_at, migration 0017, SQLSTATE
// LZ001): nothing sent after it in the round trip runs, COMMIT
// included (errCacheMoved: every later statement fails alike; write
// fails it whatever fn did). The transaction is rolled back and runs
// again with its BEGIN sent first and the cache emptied
// (broker.TxScope.SetForeign), as it did before every write. A generation moves when another process updates or
// deletes queues, partitions, groups or subscriptions: rare, and then
// only one write of each process runs twice.
//
// Every statement of a write, the first and the later ones (exec,
// query), runs on the transaction's pgx connection itself, not
// through database/sql: its rows are scanned by pgx's own rules, which
// take the same destinations for the types of this schema (bigint into
// integers, text and bytea into strings and byte slices, NULL into
// sql.Null* and pointers, boolean into bool; an integer into a bool
// they refuse, where database/sql converts it).

// errCacheMoved stops a write whose cache generation moved since this
// process's previous write (above); update runs it again.
var errCacheMoved = errors.New("another process changed what the cache holds")

// begin is the BEGIN of a write transaction (writer.begin), and the
// connection the transaction runs on.
type begin struct {
	conn       *sql.Conn // the transaction's connection, held for it
	pgc        *pgx.Conn // the pgx connection beneath conn
	wire       *wire     // counts the round trips
	lockShared bool      // the writer's lock shared (broker.UpdateOptions.Concurrent)
	ephemeral  bool      // commit without waiting for the disk
	// check: sent with the first statement, so a generation other than
	// seen stops the transaction (moved). Not set for a BEGIN sent first,
	// whose caller empties the cache when the generation moved.
	check bool
	seen  int64

	sent  bool  // BEGIN was sent: the transaction may be open
	gen   int64 // the generation read once the lock was held
	moved bool
	// failed is the error of the round trip that was to carry BEGIN and
	// did not run it (the statement could not be prepared or its
	// arguments encoded, the connection failed): every later statement
	// fails with it, and so does the write, whatever fn made of it.
	failed error
}

// queue adds BEGIN, the lock and the ephemeral setting to b.
func (p *begin) queue(b *pgx.Batch) {
	// READ COMMITTED whatever the server's default: each statement then
	// sees what committed before it, the lock's wait included (under
	// REPEATABLE READ the snapshot would be the first statement's, taken
	// before the wait).
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	switch {
	case p.check:
		// Fails, and with it what follows in the round trip, when the
		// generation is not seen (migration 0017).
		b.Queue(`SELECT lazarus_write_lock_at($1, $2, $3)`, int64(writerLock), p.lockShared, p.seen)
	case p.lockShared:
		b.Queue(`SELECT lazarus_write_lock_shared($1)`, int64(writerLock))
	default:
		b.Queue(`SELECT lazarus_write_lock($1)`, int64(writerLock))
	}
	if p.ephemeral {
		b.Queue(`SET LOCAL synchronous_commit = off`)
	}
}

// read reads the answers of what queue added.
func (p *begin) read(r pgx.BatchResults) error {
	if _, err := r.Exec(); err != nil {
		p.failed = fmt.Errorf("begin: %w", err)
		return p.failed
	}
	p.sent = true
	if err := r.QueryRow().Scan(&p.gen); err != nil {
		var pe *pgconn.PgError
		if p.check && errors.As(err, &pe) && pe.Code == generationMoved {
			p.moved = true
			return errCacheMoved
		}
		return fmt.Errorf("begin: writer lock: %w", err)
	}
	if p.ephemeral {
		if _, err := r.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
	}
	return nil
}

// generationMoved is the SQLSTATE of lazarus_write_lock_at when the
// generation is not the one seen.
const generationMoved = "LZ001"

// now sends BEGIN alone, if it is not sent yet: for what cannot go with
// it (a pipeline of writes kept, a fold, COMMIT).
func (p *begin) now(ctx context.Context) error {
	if p.moved {
		return errCacheMoved
	}
	if p.failed != nil {
		return p.failed
	}
	if p.sent {
		return nil
	}
	var b pgx.Batch
	p.queue(&b)
	p.wire.add(b.Len())
	r := p.pgc.SendBatch(ctx, &b)
	if err := p.read(r); err != nil {
		r.Close()
		return p.readFailed(err)
	}
	return p.readFailed(r.Close())
}

// readFailed notes err, the failure of a round trip meant to carry
// BEGIN, when BEGIN did not run.
func (p *begin) readFailed(err error) error {
	if err != nil && !p.sent && p.failed == nil && !errors.Is(err, errCacheMoved) {
		p.failed = err
	}
	return err
}

// first reports whether the transaction's BEGIN is still to be sent
// with its next statement (and fails once its generation has moved).
func (p *begin) first() (bool, error) {
	if p.moved {
		return false, errCacheMoved
	}
	if p.failed != nil {
		return false, p.failed
	}
	return !p.sent, nil
}

// exec and query run a write transaction's later statements on its
// pgx connection too, beneath database/sql, as its first one: its rows
// are scanned by pgx into their destinations, without database/sql's
// conversion of every value (a copy of each payload) and the locking
// around each row.
func (p *begin) exec(ctx context.Context, text string, args []any) (sql.Result, error) {
	p.wire.add(1)
	tag, err := p.pgc.Exec(ctx, text, args...)
	if err != nil {
		return nil, err
	}
	return result(tag), nil
}

func (p *begin) query(ctx context.Context, text string, args []any) (sqlcore.Rows, error) {
	p.wire.add(1)
	rows, err := p.pgc.Query(ctx, text, args...)
	if err != nil {
		return nil, err
	}
	return &writeRows{rows: rows}, nil
}

// result is a statement's sql.Result from its command tag.
type result pgconn.CommandTag

func (r result) RowsAffected() (int64, error) { return pgconn.CommandTag(r).RowsAffected(), nil }

func (r result) LastInsertId() (int64, error) {
	return 0, errors.New("LastInsertId is not supported by PostgreSQL: use RETURNING")
}

// writeRows are a write's rows, pgx's: of a statement sent with BEGIN,
// closed with the pipeline's results, or of one sent alone.
type writeRows struct {
	rows    pgx.Rows
	results pgx.BatchResults
	closed  bool
}

func (r *writeRows) Next() bool             { return r.rows.Next() }
func (r *writeRows) Scan(dest ...any) error { return r.rows.Scan(dest...) }
func (r *writeRows) Err() error             { return r.rows.Err() }

func (r *writeRows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.rows.Close()
	if r.results == nil {
		return r.rows.Err()
	}
	// The pipeline's close reports the statement's failure once more:
	// one error, not the same twice joined by a newline (a caller that
	// prints it would print a second line).
	err, cerr := r.rows.Err(), r.results.Close()
	if err != nil {
		return err
	}
	return cerr
}

// writeRow is a one-row query's answer over writeRows (sql.ErrNoRows when none).
type writeRow struct {
	rows sqlcore.Rows
	err  error
}

func (r writeRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Close(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	return r.rows.Close()
}
