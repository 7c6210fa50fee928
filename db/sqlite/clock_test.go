package sqlite

import (
	"sync"
	"time"
)

// manualClock is a broker.Clock that moves only when a test moves it, so
// that times which must differ do without waiting for the wall clock.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

// newManualClock starts at the wall clock's present, in whole
// milliseconds (the resolution the database keeps).
func newManualClock() *manualClock {
	return &manualClock{t: time.Now().Truncate(time.Millisecond)}
}

// Now returns the clock's time.
func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
