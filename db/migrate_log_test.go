package db

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
	"github.com/lazarus-dlq/lazarus/internal/pgtest"
)

// Each migration applied at start is logged, on both stores: from which
// schema version to which, and how long it took; a start with nothing to
// apply logs none.
func TestEachAppliedMigrationIsLogged(t *testing.T) {
	t.Parallel()
	for store, c := range map[string]struct {
		dsn   func() string
		files string
	}{
		"sqlite":   {func() string { return filepath.Join(t.TempDir(), "m.db") }, "sqlite/migrations/*.sql"},
		"postgres": {func() string { return pgtest.Database(t, "empty", nil) }, "postgres/migrations_pg/*.sql"},
	} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			// The files each store embeds (db/sqlite, db/postgres).
			files, err := filepath.Glob(c.files)
			if err != nil || len(files) == 0 {
				t.Fatalf("migrations: %v %v", files, err)
			}
			dsn := c.dsn()
			open := func() string {
				logs := &logBuffer{}
				d, err := OpenWith(context.Background(), dsn, Options{Sync: SyncNormal, Logger: slog.New(slog.NewTextHandler(logs, nil))})
				if err != nil {
					t.Fatal(err)
				}
				d.Close()
				return logs.String()
			}
			line := regexp.MustCompile(`msg="migration applied" store=` + store + ` from_version=(\d+) to_version=(\d+) name=\S+ took=\S+`)
			got := line.FindAllStringSubmatch(open(), -1)
			if len(got) != len(files) {
				t.Fatalf("%d migrations logged, want %d", len(got), len(files))
			}
			from := "0"
			for i, m := range got {
				want, _ := sqlcore.MigrationVersion(filepath.Base(files[i]))
				if m[1] != from || m[2] != strconv.Itoa(want) {
					t.Fatalf("log %d: from %s to %s, want from %s to %d", i, m[1], m[2], from, want)
				}
				from = m[2]
			}
			if again := line.FindAllString(open(), -1); len(again) != 0 {
				t.Fatalf("a start with nothing to apply logged %v", again)
			}
		})
	}
}

// logBuffer is a log a test reads while the code under test may write
// it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
