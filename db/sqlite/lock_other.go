//go:build !unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// lockFile refuses: without flock (see lockSuffix) there is no lock that
// the system drops whatever ends its holder, and a lock that kill -9
// leaves behind (a file made with O_EXCL, say) would keep every later
// server out until someone removes it by hand. So an exclusive open
// (a server's) fails here, saying why; the database itself opens fine
// without Options.Exclusive (tools, tests).
func lockFile(path string) (*os.File, error) {
	return nil, fmt.Errorf("lock %s%s: %w: one server per database file is enforced with flock, which %s does not have",
		path, lockSuffix, errors.ErrUnsupported, runtime.GOOS)
}
