package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/db"
)

// A database that cannot be used (no such directory, not a database,
// read-only, no space left, locked by another process) stops the start
// with a clear error and a non-zero exit, before anything listens: never a
// half-started server that fails every request.
func TestServeRefusesAnUnusableDatabase(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	nobody := os.Geteuid() == 0 // root writes anywhere: read-only cases run as nobody
	if nobody {
		letOthersIn(t, filepath.Dir(bin))
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) (dbPath string)
		// how to run: as nobody (read-only cases, when the tests run as
		// root), under a file size limit of 0 (a full disk).
		asNobody, noSpace bool
		busyTimeout       string
		want              string
	}{
		{name: "MissingDirectory", want: "the directory", setup: func(t *testing.T, dir string) string {
			return filepath.Join(dir, "missing", "lazarus.db")
		}},
		{name: "ParentIsAFile", want: "is not a directory", setup: func(t *testing.T, dir string) string {
			writeTestFile(t, filepath.Join(dir, "file"), "x")
			return filepath.Join(dir, "file", "lazarus.db")
		}},
		{name: "PathIsADirectory", want: "it is a directory", setup: func(t *testing.T, dir string) string {
			return dir
		}},
		{name: "NotADatabase", want: "it is not a SQLite database", setup: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "notes.db")
			writeTestFile(t, p, strings.Repeat("these are my notes, not a database\n", 200))
			return p
		}},
		{name: "ReadOnlyDirectory", asNobody: true, want: "is not writable", setup: func(t *testing.T, dir string) string {
			ro := filepath.Join(dir, "ro")
			if err := os.Mkdir(ro, 0o555); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(ro, "lazarus.db")
		}},
		// SQLite opens a file it may not write read-only, without a word, and
		// reads work: only the write check at start finds it.
		{name: "ReadOnlyFile", asNobody: true, want: "it cannot be written: the file and its directory (for the -wal and -shm files beside it) must be writable (write check: attempt to write a readonly database)", setup: func(t *testing.T, dir string) string {
			sub := filepath.Join(dir, "sub")
			p := filepath.Join(sub, "lazarus.db")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			createDatabase(t, p)
			if err := os.Chmod(p, 0o444); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(sub, 0o777); err != nil { // the -wal and -shm files can be made
				t.Fatal(err)
			}
			return p
		}},
		{name: "ReadOnlyFileAndDirectory", asNobody: true, want: "it cannot be written", setup: func(t *testing.T, dir string) string {
			sub := filepath.Join(dir, "sub")
			p := filepath.Join(sub, "lazarus.db")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			createDatabase(t, p)
			if err := os.Chmod(p, 0o444); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(sub, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Chmod(sub, 0o755) }) // so that the temp dir can go
			return p
		}},
		{name: "NoSpaceLeft", noSpace: true, want: "no space left", setup: func(t *testing.T, dir string) string {
			return filepath.Join(dir, "lazarus.db")
		}},
		{name: "LockedByAnotherProcess", busyTimeout: "200ms", want: "another process holds a lock on it", setup: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "lazarus.db")
			createDatabase(t, p)
			lockDatabase(t, p)
			return p
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			asNobody := tt.asNobody && nobody
			if asNobody {
				letOthersIn(t, dir)
			}
			path := tt.setup(t, dir)
			args := []string{"serve", "--addr", "127.0.0.1:0", "--db", path}
			if tt.busyTimeout != "" {
				args = append(args, "--busy-timeout", tt.busyTimeout)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var cmd *exec.Cmd
			if tt.noSpace {
				// A file size limit of 0 fails every write as a full disk does.
				cmd = exec.CommandContext(ctx, "sh", append([]string{"-c", `ulimit -f 0 && exec "$0" "$@"`, bin}, args...)...)
			} else {
				cmd = exec.CommandContext(ctx, bin, args...)
			}
			cmd.Env = append(os.Environ(), "LAZARUS_ADMIN_TOKEN=startup-token", "LAZARUS_ADMIN_PASSWORD=correct horse battery")
			if asNobody {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			err := cmd.Run()
			var exit *exec.ExitError
			if asNobody && err != nil && !errors.As(err, &exit) {
				t.Skipf("cannot run as nobody here: %v", err)
			}
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("lazarus serve --db %s: %v, want exit status 1\n%s", path, err, stderr.String())
			}
			out := stderr.String()
			if strings.Contains(out, "listening") {
				t.Errorf("it listened before it failed:\n%s", out)
			}
			if !strings.Contains(out, "lazarus: database "+path+": ") || !strings.Contains(out, tt.want) {
				t.Errorf("stderr %q, want it to name the database and say %q", out, tt.want)
			}
			t.Logf("exit 1 after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
		})
	}
}

// createDatabase creates a Lazarus database at path.
func createDatabase(t *testing.T, path string) {
	t.Helper()
	d, err := db.Open(context.Background(), path, db.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// letOthersIn lets other users (nobody) into dir and its parent: t.TempDir
// makes both private.
func letOthersIn(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
