package sqlcore

import (
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// MigrationVersion is the number a migration's file name starts with.
func MigrationVersion(file string) (int, error) {
	return strconv.Atoi(strings.SplitN(strings.TrimPrefix(file, "migrations/"), "_", 2)[0])
}

// CheckMigrationNumbers refuses a set of migration files (sorted) whose
// numbers are not 1, 2, 3, ... each once: two branches that each added
// "the next" migration would otherwise leave one of the two never
// applied (its version recorded by the other).
func CheckMigrationNumbers(files []string) error {
	for i, f := range files {
		name := f[strings.LastIndexByte(f, '/')+1:]
		v, err := MigrationVersion(name)
		if err != nil {
			return fmt.Errorf("migrate: %s: name must start with a number", name)
		}
		if v != i+1 {
			return fmt.Errorf("migrate: %s is numbered %d where migration %d belongs: numbers must run 1, 2, 3, ... each once", name, v, i+1)
		}
	}
	return nil
}

// LogMigration says at start that a migration was applied: from the
// schema version the database had to the migration's, and how long it
// took (a migration that rewrites a big table may take minutes).
func LogMigration(log *slog.Logger, store string, from int64, to int, name string, took time.Duration) {
	log.Info("migration applied", "store", store, "from_version", from, "to_version", to, "name", name, "took", took.Round(time.Millisecond).String())
}

// RefuseNewer fails when a database's newest migration is one this
// Lazarus does not know (known is its highest), on either store.
func RefuseNewer(newest sql.NullInt64, known int) error {
	if newest.Valid && newest.Int64 > int64(known) {
		return fmt.Errorf("migrate: the database has schema version %d, from a newer Lazarus; this one knows up to %d: run that version or a later one", newest.Int64, known)
	}
	return nil
}
