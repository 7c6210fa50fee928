//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockFile takes the exclusive lock of the database at path, without
// waiting, and writes this process's id in it (for the message of the
// next one). It returns the lock's open file, to be closed to release it.
func lockFile(path string) (*os.File, error) {
	name := path + lockSuffix
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := lockHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s holds its lock file %s): stop that one first, or give this one another database", ErrInUse, holder, name)
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockHolder says which process holds the lock of f, as it wrote there.
func lockHolder(f *os.File) string {
	b, err := io.ReadAll(io.LimitReader(f, 32))
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || perr != nil || pid <= 0 {
		return "another process"
	}
	return "process " + strconv.Itoa(pid)
}
