package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A second server on the database file of a running one refuses to
// start, with a message that says why and who holds it, before it
// listens: its long-polls would never hear the first one's pushes. The
// lock goes with the first server's process, even on kill -9: a new
// server then starts on the file.
func TestSecondServerOnOneDatabaseIsRefused(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	path := filepath.Join(t.TempDir(), "lazarus.db")
	first, _ := startBinary(t, bin, path, "normal")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--db", path)
	second.Env = append(os.Environ(), "LAZARUS_ADMIN_TOKEN="+killToken)
	var stderr bytes.Buffer
	second.Stderr = &stderr
	err := second.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second server: %v, want exit status 1\n%s", err, stderr.String())
	}
	out := stderr.String()
	want := "lazarus: database " + path + ": in use by another Lazarus server (process " + strconv.Itoa(first.Process.Pid) + " holds its lock file " + path + ".lock)"
	if !strings.Contains(out, want) {
		t.Fatalf("second server said %q, want %q", out, want)
	}
	if strings.Contains(out, "listening") {
		t.Fatalf("the second server listened before it failed:\n%s", out)
	}

	if err := first.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	_, url := startBinary(t, bin, path, "normal")
	resp, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health of the server started after kill -9: %d", resp.StatusCode)
	}
}
