package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A throwaway cluster belongs to the test process that started it. Main
// stops it when that process's tests are done; a process that never
// gets there (killed by go test's -timeout, which skips TestMain's end,
// or by a signal) leaves it running. So each cluster's directory holds
// its owner (ownerFile: the pid and the process's start time, which
// tells a pid the system gave again to another process), and each start
// of a cluster first stops the clusters of the same machine whose owner
// is gone (stopOrphans): a leaked cluster lives until the next test
// binary that starts one, not for ever.

// clusterPrefix begins the name of every throwaway cluster's directory,
// in the system's temporary directory.
const clusterPrefix = "lazarus-pg-"

// ownerFile is the file of a cluster's directory that names its owner.
const ownerFile = "owner"

// owner is the process that owns a cluster: its pid and start time.
type owner struct {
	pid   int
	start string // field 22 of /proc/PID/stat, "" where there is none
}

func (o owner) String() string { return strconv.Itoa(o.pid) + " " + o.start }

// self is this process as an owner.
func self() owner {
	return owner{pid: os.Getpid(), start: startTime(os.Getpid())}
}

// startTime is when process pid started, in clock ticks since boot
// (/proc/PID/stat's 22nd field), or "" when it cannot be read.
func startTime(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	// The command's name, in parentheses, may hold spaces: count the
	// fields after its closing one (the 3rd field is the first there).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// alive reports whether o is still running: a process of its pid exists,
// is not a zombie, and started when o did.
func (o owner) alive() bool {
	if err := syscall.Kill(o.pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if zombie(o.pid) {
		return false
	}
	return o.start == "" || startTime(o.pid) == o.start
}

// zombie reports whether process pid has ended and waits for its parent.
func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && len(b) > i+2 && b[i+2] == 'Z'
}

// writeOwner records this process as the owner of the cluster in dir.
func writeOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(self().String()+"\n"), 0o644)
}

// readOwner reads the owner of the cluster in dir.
func readOwner(dir string) (owner, error) {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return owner{}, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return owner{}, fmt.Errorf("%s: empty", ownerFile)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return owner{}, fmt.Errorf("%s: no pid in %q", ownerFile, b)
	}
	o := owner{pid: pid}
	if len(f) > 1 {
		o.start = f[1]
	}
	return o, nil
}

// stopOrphans stops the throwaway clusters whose owner has gone (with
// the programs in bin) and removes their directories; it returns the
// directories it removed. A directory without an owner is left alone:
// a cluster another process is starting at this moment, or one of a
// version of pgtest before owners were recorded.
func stopOrphans(bin string) ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), clusterPrefix+"*"))
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, dir := range dirs {
		o, err := readOwner(dir)
		if err != nil || o.alive() {
			continue
		}
		c := &throwaway{bin: bin, dir: dir, asPostgres: os.Geteuid() == 0}
		if err := c.stop(); err != nil {
			// A cluster that was never started, or is stopped already:
			// pg_ctl fails, and the directory is gone all the same.
			if _, serr := os.Stat(dir); serr == nil {
				errs = append(errs, fmt.Errorf("stop the cluster of gone process %d in %s: %w", o.pid, dir, err))
				continue
			}
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}
