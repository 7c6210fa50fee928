package sqlite

import (
	"bytes"
	"strings"
	"sync"
)

// logBuffer is a log a test reads while the code under test writes it,
// telling a waiter each time a record holds a text.
type logBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan struct{}
	text string
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if strings.Contains(string(p), b.text) {
		select {
		case b.seen <- struct{}{}:
		default:
		}
	}
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
