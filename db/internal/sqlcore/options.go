package sqlcore

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Sync is the durability a commit waits for: SQLite's synchronous
// setting (on PostgreSQL, synchronous_commit on or off).
type Sync string

// Durability modes. In WAL mode both survive a crash of the process (a
// commit is in the operating system's hands before it is answered); FULL
// also survives a power cut or an OS crash, at the cost of an fsync on
// every commit.
const (
	SyncFull   Sync = "FULL"
	SyncNormal Sync = "NORMAL"
)

// Options are the settings of a store's OpenWith (db.OpenWith,
// sqlite.OpenWith, postgres.OpenWith); the zero value of each field
// picks its default. Each store reads the fields it has.
type Options struct {
	Sync Sync // default SyncFull
	// BusyTimeout bounds the wait for another process's lock (default
	// sqlite.DefaultBusyTimeout). A write that waited this long fails with
	// broker.ErrUnavailable, and so does every write that queued up
	// behind it meanwhile: none waits much longer than BusyTimeout.
	BusyTimeout time.Duration
	// AutoCheckpoint chooses how the write-ahead log is copied back into
	// the database (a checkpoint). 0, the default: a background goroutine
	// does it on its own connection shortly after writes, so that no
	// write waits for it (the writer itself checkpoints only past
	// db/sqlite's walSafetyPages, should the background fall behind). Positive: the
	// writer checkpoints at commit past that many pages (SQLite's
	// wal_autocheckpoint). Negative: never, for measurements that read the
	// whole log (the log then grows without bound).
	AutoCheckpoint int
	// Logger receives what goes wrong in the background (checkpoints);
	// default slog.Default().
	Logger *slog.Logger
	// FoldEvery is how often, at most, the writer brings the counts kept
	// for the queue page up to date inside a commit (migration 0010).
	// Default 1 s; negative: at every commit, for tests.
	FoldEvery time.Duration
	// NeverAlone (PostgreSQL) makes the process write as one among
	// several even when it is alone on the database: its hot writes run
	// with the row locks they take beside other processes (db/postgres/pg_members.go).
	// For tests of that mode in one process.
	NeverAlone bool
	// Exclusive holds a lock on the database (a flock on <path>.lock,
	// db/sqlite/lock.go) for as long as the DB is open, and fails OpenWith with
	// ErrInUse when another exclusive DB holds it: a server's long-polls
	// are woken by its own pushes only, so two servers on one file would
	// each miss the other's. Tools that write beside a running server
	// (lazarus user add) leave it off.
	Exclusive bool
	// KeepAutoVacuum, for measurements only (bench's G4), leaves SQLite's
	// auto_vacuum as the file has it: a new database is made without it
	// and an older one is not converted (db/sqlite/sqlite_space.go); free pages are
	// then reused but never given back.
	KeepAutoVacuum bool

	// Wait (PostgreSQL) is how long Open tries again, with a growing
	// pause, while the server cannot be reached (refused, not started
	// yet, a name that does not resolve yet): a machine that boots
	// Lazarus and PostgreSQL together. 0: one try. Each failed try is
	// logged (without the password); an error the server answers
	// (a wrong password, no such database) is not tried again.
	Wait time.Duration
}

// ErrClosed is the error of an Update after Close.
var ErrClosed = errors.New("database closed")

// Run calls fn, turning a panic into an error: a bug in one request must
// not take the writer down with it.
func Run(fn func(broker.Tx) error, tx broker.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in a write: %v", p)
		}
	}()
	return fn(tx)
}

// SQLiteNumber is a JSON number as SQLite's json_tree gives it as text:
// an integer in decimal (one too big for 64 bits is a real), a real with
// 15 significant digits when they read back as the same number (else 17),
// with a fraction always (100.0) and an exponent below 1e-4 and from 1e17
// (1.5e-07, 1.0e+20). (SQLite reads a few numbers of 15 digits and more
// one unit in the last place apart from Go, and writes those with 17
// digits of its own: their words differ.)
func SQLiteNumber(n string) string {
	if !strings.ContainsAny(n, ".eE") {
		if i, err := strconv.ParseInt(n, 10, 64); err == nil {
			return strconv.FormatInt(i, 10)
		}
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return n
	}
	if f == 0 {
		f = 0 // -0.0 is 0.0
	}
	s := strconv.FormatFloat(f, 'e', 14, 64)
	if g, _ := strconv.ParseFloat(s, 64); g != f {
		s = strconv.FormatFloat(f, 'e', 16, 64)
	}
	mant, exp, _ := strings.Cut(s, "e")
	e, _ := strconv.Atoi(exp)
	neg := strings.HasPrefix(mant, "-")
	digits := strings.TrimRight(strings.Replace(strings.TrimPrefix(mant, "-"), ".", "", 1), "0")
	if digits == "" {
		digits = "0"
	}
	var out string
	if e < -4 || e >= 17 {
		out = digits[:1] + "." + digits[1:]
		if len(digits) == 1 {
			out += "0"
		}
		sign := "+"
		if e < 0 {
			sign, e = "-", -e
		}
		out += fmt.Sprintf("e%s%02d", sign, e)
	} else if e < 0 {
		out = "0." + strings.Repeat("0", -e-1) + digits
	} else {
		whole, frac := digits, ""
		if len(digits) > e+1 {
			whole, frac = digits[:e+1], digits[e+1:]
		} else {
			whole += strings.Repeat("0", e+1-len(digits))
		}
		if frac == "" {
			frac = "0"
		}
		out = whole + "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}
