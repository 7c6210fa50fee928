package sqlite

import "errors"

// ErrInUse is the error of an exclusive OpenWith (Options.Exclusive) on
// a database that another exclusive DB holds, in this process or another:
// a second Lazarus server on the same file.
var ErrInUse = errors.New("in use by another Lazarus server")

// lockSuffix names the lock file of a database: <db>.lock beside it.
//
// Why a file of its own rather than the database: SQLite locks the
// database with POSIX record locks, which a process loses on all of its
// descriptors of a file when it closes any one of them, and which NFS may
// emulate flock with; a lock on another file stays out of SQLite's way.
// Why flock: the kernel drops it with the last descriptor of the open
// file, so it vanishes with the process whatever ends it (kill -9
// included), and a lock file left behind holds nothing. The file is never
// removed: removing it while another process opens it would let two hold
// "the" lock. lockFile takes it (lock_unix.go); where there is no flock
// (lock_other.go), an exclusive open is refused.
const lockSuffix = ".lock"
