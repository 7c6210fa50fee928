package sqlcore

import (
	"time"
)

// MS is a time as the schema stores it: milliseconds since 1970, 0 for
// the zero time.
func MS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromMS reads a time MS wrote.
func FromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}
