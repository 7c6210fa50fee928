package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// schemaMigrationsSQL makes the table of the migrations applied.
const schemaMigrationsSQL = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`

// migrate applies the embedded migrations not yet recorded, each in its
// own transaction together with its record. A database that a newer
// Lazarus has migrated is refused.
func (d *Store) migrate(ctx context.Context) error {
	if _, err := d.write.ExecContext(ctx, schemaMigrationsSQL); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	sort.Strings(files)
	if err := sqlcore.CheckMigrationNumbers(files); err != nil {
		return err
	}
	// A database migrated by a newer Lazarus is refused: this one would
	// not keep what the newer migrations added (the ready marks of 0009,
	// say), and could leave messages that no pop would find.
	var newest sql.NullInt64
	if err := d.write.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	known := 0
	if len(files) > 0 {
		known, _ = sqlcore.MigrationVersion(files[len(files)-1])
	}
	if err := sqlcore.RefuseNewer(newest, known); err != nil {
		return err
	}
	applied := false
	from := newest.Int64 // 0: a new database
	for _, f := range files {
		name := strings.TrimPrefix(f, "migrations/")
		version, err := sqlcore.MigrationVersion(f)
		if err != nil {
			return fmt.Errorf("migrate: %s: name must start with a number", name)
		}
		body, err := migrations.ReadFile(f)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		start := time.Now()
		done, err := d.applyMigration(ctx, version, name, string(body))
		if err != nil {
			return err
		}
		if done {
			sqlcore.LogMigration(d.log, "sqlite", from, version, name, time.Since(start))
			from = int64(version)
		}
		applied = applied || done
	}
	if applied {
		// A migration that rewrites a table (0013 copies dead_letters)
		// leaves a write-ahead log about that size, which the background
		// checkpoints (PASSIVE) would copy back but never shrink: give the
		// space back before serving. Nothing else uses the file yet.
		var busy, logPages, done int
		if err := d.write.QueryRowContext(ctx, `PRAGMA main.wal_checkpoint(TRUNCATE)`).Scan(&busy, &logPages, &done); err != nil || busy != 0 {
			d.log.Warn("truncate the write-ahead log after migrating", "err", err, "busy", busy != 0)
		}
	}
	return nil
}

func (d *Store) applyMigration(ctx context.Context, version int, name, body string) (bool, error) {
	tx, err := d.write.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations WHERE version = ?", version).Scan(&n); err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	if n > 0 {
		return false, nil // applied before
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", version, name, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrate %s: %w", name, err)
	}
	return true, nil
}
