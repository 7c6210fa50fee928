package sqlite

/*
#include <stdlib.h>

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
typedef struct sqlite3_mutex sqlite3_mutex;
int sqlite3_db_config(sqlite3*, int op, ...);
int sqlite3_stmt_status(sqlite3_stmt*, int op, int reset);

// lazarus_qpsg sets SQLITE_DBCONFIG_ENABLE_QPSG (1007) on a connection
// when on is 0 or 1, and returns the setting as it then stands (-1 on
// error).
static int lazarus_qpsg(void *db, int on) {
	int now = -1;
	if (sqlite3_db_config((sqlite3*)db, 1007, on, &now) != 0) return -1;
	return now;
}

// lazarus_has_mutex says whether a connection serialises its calls with
// a mutex of its own (opened without SQLITE_OPEN_NOMUTEX).
sqlite3_mutex *sqlite3_db_mutex(sqlite3*);
static int lazarus_has_mutex(void *db) {
	return sqlite3_db_mutex((sqlite3*)db) != 0;
}

// lazarus_wal is what the writer's log hook keeps: the log's length in
// frames after the last commit, and the length at which the committing
// connection checkpoints itself (SQLite's own wal_autocheckpoint, which
// a hook of ours replaces).
typedef struct { volatile int frames; int safety; } lazarus_wal;
void *sqlite3_wal_hook(sqlite3*, int(*)(void*, sqlite3*, const char*, int), void*);
int sqlite3_wal_checkpoint(sqlite3*, const char*);

static int lazarus_wal_hook(void *arg, sqlite3 *db, const char *name, int frames) {
	lazarus_wal *w = (lazarus_wal*)arg;
	w->frames = frames;
	if (w->safety > 0 && frames >= w->safety) {
		sqlite3_wal_checkpoint(db, name); // as sqlite3WalDefaultHook does
	}
	return 0;
}

static void lazarus_watch_wal(void *db, lazarus_wal *w) {
	sqlite3_wal_hook((sqlite3*)db, lazarus_wal_hook, w);
}

// lazarus_total_changes is the rows a connection has inserted, updated or
// deleted since it opened (sqlite3_total_changes64).
long long sqlite3_total_changes64(sqlite3*);
static long long lazarus_total_changes(void *db) { return sqlite3_total_changes64((sqlite3*)db); }

// lazarus_data_version is the main database's data version
// (SQLITE_FCNTL_DATA_VERSION, 35): it changes with every commit of the
// connection, and once a transaction of the connection has begun, when
// any other connection or process has committed since its last one.
int sqlite3_file_control(sqlite3*, const char*, int, void*);
static unsigned lazarus_data_version(void *db) {
	unsigned v = 0;
	if (sqlite3_file_control((sqlite3*)db, "main", 35, &v) != 0) return 0;
	return v;
}

// lazarus_interrupt stops what a connection runs (safe from any thread).
void sqlite3_interrupt(sqlite3*);
static void lazarus_interrupt(void *db) { sqlite3_interrupt((sqlite3*)db); }

// lazarus_no_memstatus switches SQLite's memory statistics off
// (SQLITE_CONFIG_MEMSTATUS, 9), before SQLite is first used: its
// return is SQLITE_MISUSE (21) once SQLite is initialized.
int sqlite3_config(int, ...);
static int lazarus_no_memstatus(void) { return sqlite3_config(9, 0); }

// lazarus_memory_used is SQLITE_STATUS_MEMORY_USED (0): 0 with the
// statistics off.
int sqlite3_status64(int, long long*, long long*, int);
static long long lazarus_memory_used(void) {
	long long now = 0, high = 0;
	sqlite3_status64(0, &now, &high, 0);
	return now;
}

// lazarus_vm_steps is the virtual machine's steps that the prepared
// statements of a connection have run (SQLITE_STMTSTATUS_VM_STEP, 4,
// summed over sqlite3_next_stmt): every row a statement looks at, a full-
// text index's matches that it then leaves out included.
sqlite3_stmt *sqlite3_next_stmt(sqlite3*, sqlite3_stmt*);
static long long lazarus_vm_steps(void *db) {
	long long n = 0;
	sqlite3_stmt *s = 0;
	while ((s = sqlite3_next_stmt((sqlite3*)db, s)) != 0) n += sqlite3_stmt_status(s, 4, 0);
	return n;
}

// lazarus_reprepares is SQLITE_STMTSTATUS_REPREPARE (5) of a statement.
static int lazarus_reprepares(void *stmt) {
	return sqlite3_stmt_status((sqlite3_stmt*)stmt, 5, 0);
}

// lazarus_runs is SQLITE_STMTSTATUS_RUN (6) of a statement: how many
// times it ran.
static int lazarus_runs(void *stmt) {
	return sqlite3_stmt_status((sqlite3_stmt*)stmt, 6, 0);
}

// lazarus_cache_used is the bytes of pages a connection's cache holds
// (SQLITE_DBSTATUS_CACHE_USED, 1; counted whether or not the memory
// statistics are on).
int sqlite3_db_status(sqlite3*, int op, int *cur, int *high, int reset);
static int lazarus_cache_used(void *db) {
	int now = 0, high = 0;
	if (sqlite3_db_status((sqlite3*)db, 1, &now, &high, 0) != 0) return -1;
	return now;
}
*/
import "C"

import (
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/broker"
)

// DriverName is the database/sql driver every connection of a DB is
// opened with: go-sqlite3 with the query planner stability guarantee
// (QPSG) switched on, and temporary storage in memory.
//
// Why: SQLite marks a prepared statement for re-preparation when a bound
// value might change its plan: a LIMIT ?, and (since 3.4x) an equality
// `col = ?` that some candidate plan filters on, which is nearly every
// query of ours. go-sqlite3 clears the bindings after every run, and
// clearing bindings expires such a statement, so each run parsed and
// planned its SQL anew: a third of the CPU of a pop of 20 messages, and
// more on the dashboard's queries. With QPSG, plans do not depend on
// bound values (we keep no sqlite_stat4 for them to depend on anyway), no
// statement is marked, and a prepared statement stays prepared.
//
// Temporary storage: go-sqlite3 builds SQLite with temporary files on
// disk (SQLITE_TEMP_STORE=1). A statement that changes many rows, and
// every savepoint of a group commit, keeps the pages it changes in a
// statement journal, which past 64 KiB spilled to a temporary file: a
// bulk replay's chunk opened, wrote and unlinked one (replays are about
// 15 % faster without). PRAGMA temp_store=MEMORY keeps them in memory; they hold what
// one transaction changes, and transactions are kept short.
const DriverName = "sqlite3-lazarus"

func init() {
	// SQLite's memory statistics (sqlite3_memory_used, which nothing
	// here reads) take a process-wide mutex around each of its
	// allocations and frees: 4 % of a push→pop→ack's instructions
	// (callgrind, bench's L1). Without them SQLite allocates straight
	// from malloc. It is set once, before any connection opens SQLite; a
	// program that opened one before this package's init keeps them.
	C.lazarus_no_memstatus()
	sql.Register(DriverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		if handle(c, "db", "_Ctype_struct_sqlite3") == nil {
			return errors.New("sqlite: this go-sqlite3 keeps its connection handle elsewhere; db/sqlite/driver.go needs updating")
		}
		if QPSG(c, 1) != 1 {
			return errors.New("sqlite: SQLite refused the query planner stability guarantee (SQLITE_DBCONFIG_ENABLE_QPSG)")
		}
		if _, err := c.Exec("PRAGMA temp_store=MEMORY", nil); err != nil {
			return fmt.Errorf("sqlite: temp_store: %w", err)
		}
		// lazarus_fingerprint(error) is broker.Fingerprint, for migration
		// 0014's backfill; pure: the same text always gives the same.
		if err := c.RegisterFunc("lazarus_fingerprint", broker.Fingerprint, true); err != nil {
			return fmt.Errorf("sqlite: lazarus_fingerprint: %w", err)
		}
		return attachSearch(c)
	}})
}

// QPSG sets (on 0 or 1) or reads (on -1) the query planner stability
// guarantee of a connection (-1 when its handle cannot be found); the
// bench gives its references ours with it. go-sqlite3 keeps the C handle
// unexported, so it is read by reflection; the open test checks the
// setting on every connection, should a later go-sqlite3 rename the
// field.
func QPSG(c *sqlite3.SQLiteConn, on int) int {
	h := handle(c, "db", "_Ctype_struct_sqlite3")
	if h == nil {
		return -1
	}
	return int(C.lazarus_qpsg(h, C.int(on)))
}

// walWatch is the writer's view of its write-ahead log's length, kept by
// an SQLite log hook in C memory (SQLite keeps the pointer) and read by
// the goroutine that committed, after the commit, with no call into C.
type walWatch struct{ w *C.lazarus_wal }

// watchWAL sets the hook on the writer's connection c: it records the
// log's length in frames after each commit and, past safety frames (0:
// never), checkpoints on the committing connection as SQLite's
// wal_autocheckpoint would (a later PRAGMA wal_autocheckpoint replaces
// the hook).
func watchWAL(c *sqlite3.SQLiteConn, safety int) (*walWatch, error) {
	h := handle(c, "db", "_Ctype_struct_sqlite3")
	if h == nil {
		return nil, errors.New("sqlite: no connection handle for the log hook")
	}
	w := (*C.lazarus_wal)(C.calloc(1, C.sizeof_lazarus_wal))
	w.safety = C.int(safety)
	C.lazarus_watch_wal(h, w)
	return &walWatch{w: w}, nil
}

// frames is the log's length in frames after the last commit.
func (w *walWatch) frames() int { return int(w.w.frames) }

// free releases the hook's memory, once its connection is closed.
func (w *walWatch) free() { C.free(unsafe.Pointer(w.w)) }

// totalChanges is sqlite3_total_changes64 of the connection of handle h.
func totalChanges(h unsafe.Pointer) int64 { return int64(C.lazarus_total_changes(h)) }

// dataVersion is the data version of the database on the connection of
// handle h (lazarus_data_version).
func dataVersion(h unsafe.Pointer) uint32 { return uint32(C.lazarus_data_version(h)) }

// interruptHandle is the C handle of c, for interrupt (nil if unknown).
func interruptHandle(c *sqlite3.SQLiteConn) unsafe.Pointer {
	return handle(c, "db", "_Ctype_struct_sqlite3")
}

// interrupt makes the statement running on the connection of handle h
// fail with SQLITE_INTERRUPT (and those it starts until none runs).
func interrupt(h unsafe.Pointer) { C.lazarus_interrupt(h) }

// HasMutex says whether a connection takes a mutex of its own around
// each call into SQLite (-1 if unknown); for tests and the bench.
func HasMutex(c *sqlite3.SQLiteConn) int {
	h := handle(c, "db", "_Ctype_struct_sqlite3")
	if h == nil {
		return -1
	}
	return int(C.lazarus_has_mutex(h))
}

// VMSteps says how many steps of SQLite's virtual machine the
// statements a connection keeps prepared have run (its statement cache's:
// go-sqlite3 keeps the statements closed there): how many rows they
// looked at, whatever the time; for tests.
func VMSteps(c *sqlite3.SQLiteConn) int64 {
	h := handle(c, "db", "_Ctype_struct_sqlite3")
	if h == nil {
		return -1
	}
	return int64(C.lazarus_vm_steps(h))
}

// Reprepares says how many times SQLite has prepared a statement again
// since it was first prepared (-1 if unknown); for tests and the bench.
func Reprepares(s *sqlite3.SQLiteStmt) int {
	h := handle(s, "s", "_Ctype_struct_sqlite3_stmt")
	if h == nil {
		return -1
	}
	return int(C.lazarus_reprepares(h))
}

// runs says how many times a statement ran since it was prepared (-1 if
// unknown).
func runs(s *sqlite3.SQLiteStmt) int {
	h := handle(s, "s", "_Ctype_struct_sqlite3_stmt")
	if h == nil {
		return -1
	}
	return int(C.lazarus_runs(h))
}

// cacheUsed is the bytes of pages c's cache holds (-1 if unknown); for
// tests.
func cacheUsed(c *sqlite3.SQLiteConn) int {
	h := handle(c, "db", "_Ctype_struct_sqlite3")
	if h == nil {
		return -1
	}
	return int(C.lazarus_cache_used(h))
}

// memoryUsed is the memory SQLite says it holds: 0 while its memory
// statistics are off (init).
func memoryUsed() int64 { return int64(C.lazarus_memory_used()) }

// StmtCacheSize is how many statements a connection keeps prepared in
// go-sqlite3's statement cache (its DSN's _stmt_cache_size; 0 when it
// keeps none, -1 if unknown); for tests and the bench, which gives its
// references the cache our readers have (ReadStmtCache). go-sqlite3
// keeps the cache unexported: its capacity is read by reflection.
func StmtCacheSize(c *sqlite3.SQLiteConn) int {
	v := reflect.ValueOf(c).Elem()
	on, cache := v.FieldByName("stmtCacheEnabled"), v.FieldByName("stmtCache")
	if !on.IsValid() || on.Kind() != reflect.Bool || !cache.IsValid() || cache.Kind() != reflect.Slice {
		return -1
	}
	if !on.Bool() {
		return 0
	}
	return cache.Cap()
}

// handle is the C pointer go-sqlite3 keeps in the named field of v, if
// that field is a non-nil pointer to the C type named cType (nil
// otherwise: never a pointer to anything else).
func handle(v any, field, cType string) unsafe.Pointer {
	f := reflect.ValueOf(v).Elem().FieldByName(field)
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() {
		return nil
	}
	if t := f.Type().Elem(); t.Name() != cType || t.PkgPath() != "github.com/mattn/go-sqlite3" {
		return nil
	}
	return f.UnsafePointer()
}
