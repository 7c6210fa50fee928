// Package static holds the dashboard's CSS and its vendored scripts (htmx,
// the chart library) at pinned versions, embedded into the binary with an
// embed directive (static.go).
package static
