package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A connection that broke in the middle of a transaction (before its
// COMMIT) is broker.ErrUnavailable, answered 503 "nothing was changed":
// the errors the fault campaign (faults/) saw answered 500 when
// PostgreSQL crashed or a process was cut from it. A read stopped by its
// deadline is not one (it is answered as too slow), nor is an error of
// the server's.
func TestABrokenConnectionIsUnavailable(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("push: insert: begin: writer lock: %w", io.ErrUnexpectedEOF),
		fmt.Errorf("dead letter: error group: %w", io.ErrUnexpectedEOF),
		fmt.Errorf("count messages: rollback to savepoint: %w", driver.ErrBadConn),
		fmt.Errorf("ack: %w", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}),
		fmt.Errorf("ack: %w", syscall.EPIPE),
	} {
		if got := unavailable(err); !errors.Is(got, broker.ErrUnavailable) {
			t.Errorf("%v: %v, want broker.ErrUnavailable", err, got)
		}
	}
	for _, err := range []error{
		fmt.Errorf("read: %w", context.DeadlineExceeded),
		errors.New("a statement's own error"),
	} {
		if got := unavailable(err); errors.Is(got, broker.ErrUnavailable) {
			t.Errorf("%v: %v, want it left as it is", err, got)
		}
	}
	// A COMMIT whose answer never came stays unknown.
	unknown := fmt.Errorf("%w: %w", broker.ErrCommitUnknown, io.ErrUnexpectedEOF)
	if got := unavailable(unknown); errors.Is(got, broker.ErrUnavailable) || !errors.Is(got, broker.ErrCommitUnknown) {
		t.Errorf("%v: %v, want the commit's outcome unknown", unknown, got)
	}
}
