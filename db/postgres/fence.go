package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Fencing a paused writer. A process paused in a write (SIGSTOP, a VM
// paused, a machine swapping) holds the writer's lock until its session
// ends, and every write of every process waits. Its backend is found in
// one of two states: idle in its transaction (paused between two
// statements), or active, blocked sending (wait_event ClientWrite:
// paused while the server sends it a write's rows, a pop's messages, a
// replay chunk's payloads, more than the socket's buffers hold).
//
// The server's own limit cannot tell a paused process from a slow one:
// idle_in_transaction_session_timeout counts the time a statement takes
// to arrive (a large push over a slow link) as idle, ends a session
// whether or not anyone waits for it, and never applies to a backend
// blocked sending; statement_timeout is not acted on while a backend
// blocks sending, and a paused process's kernel keeps acknowledging TCP,
// so neither keepalives nor tcp_user_timeout end it. So the server's
// limit is only a backstop (writeIdle, a minute), and each process, as
// it counts the processes (members.go), looks for such a backend: a
// Lazarus write session (application_name "lazarus") holding the
// writer's lock, found idle in its transaction or blocked sending in the
// same state since the same moment at every look for longer than
// stuckAfter while another session waits for a lock; and ends it
// (pg_terminate_backend, which a role may do to its own sessions). Its
// transaction rolls back; the paused process, once it runs again, finds
// its session gone (errSessionLost) and runs its write again. A healthy
// process sends its next statement, and reads its rows as they come,
// within moments; and one that holds nobody up is left alone, however
// slow.

// stuckWriters is what the previous look found: each backend idle in
// its transaction or blocked sending, by pid, with the moment it came
// to that (its state's change, or its statement's start) and when it
// was first seen so.
type stuckWriters map[int32]stuckSince

type stuckSince struct {
	since time.Time
	seen  time.Time
}

// stuckFor is the fence's bound when the URL set
// idle_in_transaction_session_timeout for the writes' pool: that, read
// on conn, a connection of that pool. 0 (the URL turned it off) turns
// the fence off too.
func stuckFor(ctx context.Context, conn *pgx.Conn) (time.Duration, error) {
	var ms int64
	err := conn.QueryRow(ctx, `SELECT setting::bigint FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'`).Scan(&ms)
	return time.Duration(ms) * time.Millisecond, err
}

// fence looks once (on conn, the count's connection) and ends the
// backends found stuck for at least after; it returns what it found,
// for the next look, and the pids it ended.
func fence(ctx context.Context, conn *pgx.Conn, prev stuckWriters, now time.Time, after time.Duration) (stuckWriters, []int32, error) {
	// A bigint key is two oids: its high and low 32 bits. Only while
	// a session waits for a lock (the writer's, or a row's: the
	// consumer a paused pop leases): otherwise nobody is held up.
	// Idle: since its state changed (its last statement's end); blocked
	// sending: since its statement's start.
	rows, err := conn.Query(ctx, `SELECT a.pid, CASE WHEN a.state = 'active' THEN a.query_start ELSE a.state_change END
		FROM pg_stat_activity a
		JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory' AND l.granted
			AND l.database = a.datid AND l.classid::bigint = $1 AND l.objid::bigint = $2 AND l.objsubid = 1
		WHERE a.datname = current_database() AND a.application_name = 'lazarus'
			AND (a.state = 'active' AND a.wait_event = 'ClientWrite'
				OR a.state IN ('idle in transaction', 'idle in transaction (aborted)'))
			AND EXISTS (SELECT 1 FROM pg_stat_activity w WHERE w.datid = a.datid AND w.wait_event_type = 'Lock')`,
		int64(writerLock>>32), int64(writerLock&0xffffffff))
	if err != nil {
		return nil, nil, err
	}
	found := stuckWriters{}
	for rows.Next() {
		var pid int32
		var start time.Time
		if err := rows.Scan(&pid, &start); err != nil {
			rows.Close()
			return nil, nil, err
		}
		s := stuckSince{since: start, seen: now}
		if p, ok := prev[pid]; ok && p.since.Equal(start) {
			s.seen = p.seen // stuck in the same state since
		}
		found[pid] = s
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	var ended []int32
	for pid, s := range found {
		if now.Sub(s.seen) < after {
			continue
		}
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil {
			return found, ended, err
		}
		if ok {
			ended = append(ended, pid)
			delete(found, pid)
		}
	}
	return found, ended, nil
}

// fenceOnce is fence with the server's refusal logged once (a role not
// allowed to end another session, say, while the count goes on) and the
// sessions it ended logged, and what it found for the next look.
func (p *Store) fenceOnce(ctx context.Context, conn *pgx.Conn, stuck stuckWriters, after time.Duration, failed *bool) stuckWriters {
	fctx, cancel := context.WithTimeout(ctx, 5*memberEvery)
	defer cancel()
	found, ended, err := fence(fctx, conn, stuck, time.Now(), after)
	// The server's refusal is told once; a connection that failed (or
	// a look that outlasted its deadline: the process was paused) is
	// the count's to find, which then counts on another.
	var pe *pgconn.PgError
	if errors.As(err, &pe) && !*failed {
		*failed = true
		p.log.Warn("cannot look for paused writers to end (warned once)", "err", err)
	}
	for _, pid := range ended {
		p.log.Warn("ended a write session of another process, found idle in its transaction or blocked sending it rows while it held the writer's lock, which other writes waited for: that process stopped (paused?); its write is rolled back", "backend_pid", pid, "stuck_for", after.String())
	}
	return found
}
