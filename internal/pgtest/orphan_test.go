package pgtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// envChild makes the test binary a child that starts a throwaway
// cluster, prints its data directory and waits to be killed: a test
// binary that dies before Main can stop its cluster.
const envChild = "LAZARUS_PGTEST_ORPHAN_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		if _, err := adminURL(); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("data:", DataDir())
		select {} // until killed
	}
	os.Exit(Main(m))
}

// A test binary killed before its end (go test's -timeout) leaves its
// cluster running; the next start of a cluster stops it and removes its
// directory, and leaves the clusters of live owners alone.
func TestAClusterWhoseOwnerDiedIsStoppedByTheNextStart(t *testing.T) {
	if os.Getenv(EnvURL) != "" {
		t.Fatalf("%s is set: this test is of throwaway clusters; run it without", EnvURL)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// On a failure before the kill below, the child must not live on.
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the child said nothing: %v", err)
	}
	data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
	if !ok {
		t.Fatalf("the child: %s", line)
	}
	dir := filepath.Dir(data)
	postmaster := postmasterPID(t, data)
	if o, err := readOwner(dir); err != nil || o.pid != cmd.Process.Pid || !o.alive() {
		t.Fatalf("owner of %s = %+v, %v; want the live child %d", dir, o, err, cmd.Process.Pid)
	}
	// Its owner alive, the cluster is left alone.
	bin, err := binDir()
	if err != nil {
		t.Fatal(err)
	}
	if removed, err := stopOrphans(bin); err != nil || slices.Contains(removed, dir) {
		t.Fatalf("stopOrphans with the owner alive = %v, %v; want %s kept", removed, err, dir)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = cmd.Process.Wait()
	if !running(postmaster) {
		t.Fatalf("the cluster stopped with its owner: nothing to test")
	}

	// The next start of a cluster stops it.
	c, err := startCluster()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.stop(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead child's cluster directory %s: %v, want it removed", dir, err)
	}
	if running(postmaster) {
		t.Errorf("the dead child's postmaster %d runs on", postmaster)
	}
	if o, err := readOwner(c.dir); err != nil || o != self() {
		t.Errorf("owner of the new cluster = %+v, %v; want this process", o, err)
	}
}

// postmasterPID is the pid in a running cluster's postmaster.pid.
func postmasterPID(t *testing.T, data string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// running reports whether process pid runs (pg_ctl stop -w has waited
// for the postmaster to end: no wait is needed here).
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !zombie(pid)
}
