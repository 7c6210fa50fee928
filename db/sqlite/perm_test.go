package sqlite

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A new database, its -wal and -shm files and its lock file are its
// owner's alone (0600), whatever the umask lets through.
func TestANewDatabaseAndItsFilesAreTheOwnersAlone(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "private.db")
	d, err := OpenWith(context.Background(), path, Options{Sync: SyncNormal, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := broker.New(broker.Config{Store: d})
	defer b.Close()
	if _, err := b.Push(context.Background(), []broker.PushItem{{Queue: "q", Partition: "p", TransactionID: "t", Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm", path + lockSuffix} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if perm := st.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s: mode %#o, want 0600", filepath.Base(f), perm)
		}
	}
}

// A database made before (0644) is served as it is, with a warning that
// says how to make it private.
func TestAnOlderDatabaseReadableByOthersIsWarnedOf(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.db")
	d, err := Open(context.Background(), path, SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	d, err = OpenWith(context.Background(), path, Options{Sync: SyncNormal, Exclusive: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if !strings.Contains(logs.String(), "may be read by other users") || !strings.Contains(logs.String(), "chmod 600") {
		t.Fatalf("no warning of the file's mode:\n%s", logs)
	}
}
