// Package sqlcore is the part of Lazarus's storage both stores share:
// Tx, the implementation of broker.Tx (every statement written once, in
// SQLite's dialect, which the PostgreSQL store translates; PGQuery notes
// a PostgreSQL text written by hand beside its statement; a filter's
// statement is composed of fragments, Frag and Stmt), row scanning,
// the arithmetic of the kept counts (FoldRows), and the check of
// migration numbers; and what the stores and their chooser (package db)
// share besides: ErrClosed, Run. (Each store has Options of its own;
// package db maps its caller's to the chosen store's.)
//
// It touches no database of its own. A Tx reaches its database only
// through an Executor, and leaves what differs between the stores to a
// Dialect and the Locks of its write: each store (packages db/sqlite
// and db/postgres) implements those, makes its Tx with NewTx, and
// owns the transaction around it (begin, commit, savepoints, the ready
// mark with MarkReady, the fold).
package sqlcore
