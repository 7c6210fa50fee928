// Package views holds the dashboard's templ components and their view
// models: pure functions of their inputs, with no I/O and no echo. The
// generated *_templ.go files are committed, and `go tool task test` fails
// when they are stale.
package views
