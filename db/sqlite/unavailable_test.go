package sqlite

import (
	"errors"
	"fmt"
	"testing"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/broker"
)

func TestUnavailableMapsBusyAndLockedOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"Busy", sqlite3.Error{Code: sqlite3.ErrBusy}, true},
		{"BusyWrapped", fmt.Errorf("begin: %w", sqlite3.Error{Code: sqlite3.ErrBusy, ExtendedCode: sqlite3.ErrBusySnapshot}), true},
		{"Locked", sqlite3.Error{Code: sqlite3.ErrLocked}, true},
		{"Constraint", sqlite3.Error{Code: sqlite3.ErrConstraint}, false},
		{"Full", sqlite3.Error{Code: sqlite3.ErrFull}, false},
		{"Other", errors.New("boom"), false},
		{"Nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := unavailable(tt.err)
			if errors.Is(got, broker.ErrUnavailable) != tt.want {
				t.Fatalf("unavailable(%v) = %v, want ErrUnavailable: %v", tt.err, got, tt.want)
			}
			if tt.err != nil && !errors.Is(got, tt.err) {
				t.Fatalf("unavailable(%v) = %v lost its cause", tt.err, got)
			}
		})
	}
}
