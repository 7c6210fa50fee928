package db

import (
	"io/fs"
	"sort"
	"strings"
	"testing"
)

// Each store's migrations are numbered 1, 2, 3, ... each once: two
// branches that each add "the next" migration must not both land with
// one number (the second would never be applied).
func TestMigrationsAreNumberedOnceEach(t *testing.T) {
	for _, set := range []struct {
		fsys fs.FS
		glob string
	}{{migrations, "migrations/*.sql"}, {pgMigrations, "migrations_pg/*.sql"}} {
		files, err := fs.Glob(set.fsys, set.glob)
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v %v", set.glob, files, err)
		}
		sort.Strings(files)
		if err := checkMigrationNumbers(files); err != nil {
			t.Errorf("%s: %v", set.glob, err)
		}
	}
	for _, bad := range [][]string{
		{"migrations/0001_a.sql", "migrations/0002_b.sql", "migrations/0002_c.sql"},
		{"migrations/0001_a.sql", "migrations/0003_c.sql"},
		{"migrations_pg/0002_a.sql"},
		{"migrations/x_a.sql"},
	} {
		err := checkMigrationNumbers(bad)
		if err == nil {
			t.Errorf("%v: accepted", bad)
		} else if !strings.Contains(err.Error(), "migrate:") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
