package sqlite

import (
	"errors"
	"fmt"
	"syscall"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/lazarus-dlq/lazarus/broker"
)

// unavailable marks SQLite's busy and locked errors (another process held
// a lock past the busy timeout) as broker.ErrUnavailable, and its errors
// of a full disk as broker.ErrNoSpace, keeping the cause for the log.
func unavailable(err error) error {
	if err == nil || errors.Is(err, broker.ErrUnavailable) || errors.Is(err, broker.ErrNoSpace) {
		return err
	}
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked) {
		return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
	}
	if isNoSpace(err) {
		return fmt.Errorf("%w: %w", broker.ErrNoSpace, err)
	}
	return err
}

// isNoSpace reports whether err is SQLite's error of a full disk: SQLITE_FULL,
// or an I/O error whose cause is no space left, a quota or a file size
// limit (SQLite says SQLITE_IOERR_WRITE for EFBIG, SQLITE_IOERR_SHMSIZE
// when the -shm file cannot grow).
func isNoSpace(err error) bool {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.SystemErrno {
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		return true
	}
	return se.Code == sqlite3.ErrFull
}

// isBusy reports whether err is SQLite's busy or locked error, or
// broker.ErrUnavailable.
func isBusy(err error) bool { return errors.Is(unavailable(err), broker.ErrUnavailable) }
