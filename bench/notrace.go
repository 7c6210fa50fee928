//go:build !sqlite_trace

package main

// traceAvailable: without the sqlite_trace tag, go-sqlite3 has no trace
// hook, and the statement counts and query plans are skipped.
const traceAvailable = false

func installTrace() {}

// recorder.record is called by trace.go's hook alone: kept in use here so
// that this build (the one go tool task test lints) does not see it unused.
var _ = (*recorder).record
