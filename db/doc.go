// Package db keeps Lazarus's state: Open chooses the store, SQLite's
// (package db/sqlite: one writer with group commit, a read pool, the
// checkpointer) on a file path or PostgreSQL's (package db/postgres:
// pipelined writes, the notifier, membership and leadership) on a URL,
// each with its schema as numbered embedded migrations, and returns it
// as a DB. Both stores run the same broker.Tx, sqlcore.Tx
// (db/internal/sqlcore), through an executor and a dialect of their
// own. All SQL lives in the two store packages and in sqlcore.
// How each store keeps the contract of broker.Store and broker.Tx is
// written in its package, not in broker.
package db

// The PostgreSQL catalog is generated in db/postgres (statements.go);
// go generate ./db runs it there.
//
//go:generate go generate ./postgres
