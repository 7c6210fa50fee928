//go:build !unix

package archive

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// openDay is open_unix.go's, without openat: links are looked for before
// the opens (Lstat), which a link swapped in between escapes.
func openDay(root, dir, name string) (f, d *os.File, newDir, newFile bool, err error) {
	dp := filepath.Join(root, dir)
	switch err := os.Mkdir(dp, 0o700); {
	case err == nil:
		newDir = true
	case !errors.Is(err, os.ErrExist):
		return nil, nil, false, false, fmt.Errorf("archive: %w", err)
	}
	if st, err := os.Lstat(dp); err != nil || !st.IsDir() {
		return nil, nil, false, false, fmt.Errorf("archive: %s in %s is not a directory (a link?): refused", dir, root)
	}
	p := filepath.Join(dp, name)
	st, err := os.Lstat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		newFile = true
	case err != nil:
		return nil, nil, false, false, fmt.Errorf("archive: %w", err)
	case !st.Mode().IsRegular():
		return nil, nil, false, false, fmt.Errorf("archive: %s/%s is not a file of the archive's own: refused", dir, name)
	}
	flags := os.O_RDWR | os.O_APPEND
	if newFile {
		flags |= os.O_CREATE | os.O_EXCL
	}
	if f, err = os.OpenFile(p, flags, 0o600); err != nil {
		return nil, nil, false, false, fmt.Errorf("archive: %w", err)
	}
	if d, err = os.Open(dp); err != nil {
		f.Close()
		return nil, nil, false, false, fmt.Errorf("archive: %w", err)
	}
	return f, d, newDir, newFile, nil
}
