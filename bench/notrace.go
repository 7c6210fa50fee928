//go:build !sqlite_trace

package main

// traceAvailable: without the sqlite_trace tag, go-sqlite3 has no trace
// hook, and the statement counts and query plans are skipped.
const traceAvailable = false

func installTrace() {}
