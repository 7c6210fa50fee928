package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Fencing a paused writer that the server does not end. A process
// paused while the server sends it a write's rows (a pop's messages, a
// replay chunk's payloads: more than the socket's buffers hold) leaves
// its backend active, blocked sending (wait_event ClientWrite), not idle
// in its transaction: idle_in_transaction_session_timeout (writeIdle)
// never applies, statement_timeout is not acted on while a backend
// blocks sending, and a paused process's kernel (SIGSTOP) keeps
// acknowledging TCP, so neither keepalives nor tcp_user_timeout end it.
// It holds the writer's lock until it runs again, and every write of
// every process waits.
//
// So each process, as it counts the processes (members.go), looks for
// such a backend: a Lazarus write session (application_name "lazarus")
// holding the writer's lock, found blocked sending, its statement the
// same, at every look for longer than writeIdle while another write
// waits for the lock; and ends it (pg_terminate_backend, which a role
// may do to its own sessions). Its transaction rolls back; the paused
// process, once it runs again, finds its session gone, as after
// writeIdle (errSessionLost). A healthy process reads its rows as they
// come: its backend blocks sending only for moments.

// stuckWriters is what the previous look found: each backend blocked
// sending, by pid, with its statement's start and when it was first
// seen so.
type stuckWriters map[int32]stuckSince

type stuckSince struct {
	queryStart time.Time
	seen       time.Time
}

// stuckFor is how long a backend holding the writer's lock must have
// been found blocked sending before it is ended: writeIdle's.
var stuckFor = func() time.Duration {
	d, err := time.ParseDuration(writeIdle)
	if err != nil {
		panic(err)
	}
	return d
}()

// fence looks once (on conn, the count's connection) and ends the
// backends found stuck for stuckFor; it returns what it found, for the
// next look, and the pids it ended.
func fence(ctx context.Context, conn *pgx.Conn, prev stuckWriters, now time.Time) (stuckWriters, []int32, error) {
	// A bigint key is two oids: its high and low 32 bits. Only while a
	// write waits for the lock: otherwise nobody is held up.
	rows, err := conn.Query(ctx, `SELECT a.pid, a.query_start FROM pg_stat_activity a
		JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory' AND l.granted
			AND l.database = a.datid AND l.classid::bigint = $1 AND l.objid::bigint = $2 AND l.objsubid = 1
		WHERE a.datname = current_database() AND a.application_name = 'lazarus'
			AND a.state = 'active' AND a.wait_event = 'ClientWrite'
			AND EXISTS (SELECT 1 FROM pg_locks w WHERE w.locktype = 'advisory' AND NOT w.granted
				AND w.database = a.datid AND w.classid::bigint = $1 AND w.objid::bigint = $2 AND w.objsubid = 1)`,
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
		s := stuckSince{queryStart: start, seen: now}
		if p, ok := prev[pid]; ok && p.queryStart.Equal(start) {
			s.seen = p.seen // stuck in the same statement since
		}
		found[pid] = s
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	var ended []int32
	for pid, s := range found {
		if now.Sub(s.seen) < stuckFor {
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
