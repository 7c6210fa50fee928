package db

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationVersion is the number a migration's file name starts with.
func migrationVersion(file string) (int, error) {
	return strconv.Atoi(strings.SplitN(strings.TrimPrefix(file, "migrations/"), "_", 2)[0])
}

// checkMigrationNumbers refuses a set of migration files (sorted) whose
// numbers are not 1, 2, 3, ... each once: two branches that each added
// "the next" migration would otherwise leave one of the two never
// applied (its version recorded by the other).
func checkMigrationNumbers(files []string) error {
	for i, f := range files {
		name := f[strings.LastIndexByte(f, '/')+1:]
		v, err := migrationVersion(name)
		if err != nil {
			return fmt.Errorf("migrate: %s: name must start with a number", name)
		}
		if v != i+1 {
			return fmt.Errorf("migrate: %s is numbered %d where migration %d belongs: numbers must run 1, 2, 3, ... each once", name, v, i+1)
		}
	}
	return nil
}

// schemaMigrationsSQL makes the table of the migrations applied.
const schemaMigrationsSQL = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`

// migrate applies the embedded migrations not yet recorded, each in its
// own transaction together with its record. A database that a newer
// Lazarus has migrated is refused.
func (d *DB) migrate(ctx context.Context) error {
	if _, err := d.write.ExecContext(ctx, schemaMigrationsSQL); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	sort.Strings(files)
	if err := checkMigrationNumbers(files); err != nil {
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
		known, _ = migrationVersion(files[len(files)-1])
	}
	if err := refuseNewer(newest, known); err != nil {
		return err
	}
	applied := false
	from := newest.Int64 // 0: a new database
	for _, f := range files {
		name := strings.TrimPrefix(f, "migrations/")
		version, err := migrationVersion(f)
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
			logMigration(d.log, "sqlite", from, version, name, time.Since(start))
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
		if err := d.write.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logPages, &done); err != nil || busy != 0 {
			d.log.Warn("truncate the write-ahead log after migrating", "err", err, "busy", busy != 0)
		}
	}
	return nil
}

// logMigration says at start that a migration was applied: from the
// schema version the database had to the migration's, and how long it
// took (a migration that rewrites a big table may take minutes).
func logMigration(log *slog.Logger, store string, from int64, to int, name string, took time.Duration) {
	log.Info("migration applied", "store", store, "from_version", from, "to_version", to, "name", name, "took", took.Round(time.Millisecond).String())
}

// refuseNewer fails when a database's newest migration is one this
// Lazarus does not know (known is its highest), on either store.
func refuseNewer(newest sql.NullInt64, known int) error {
	if newest.Valid && newest.Int64 > int64(known) {
		return fmt.Errorf("migrate: the database has schema version %d, from a newer Lazarus; this one knows up to %d: run that version or a later one", newest.Int64, known)
	}
	return nil
}

func (d *DB) applyMigration(ctx context.Context, version int, name, body string) (bool, error) {
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
