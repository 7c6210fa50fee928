package postgres

import (
	"io/fs"
	"sort"
	"testing"

	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Each store's migrations are numbered 1, 2, 3, ... each once: two
// branches that each add "the next" migration must not both land with
// one number (the second would never be applied). What the check
// refuses is sqlcore's test.
func TestMigrationsAreNumberedOnceEach(t *testing.T) {
	for _, set := range []struct {
		fsys fs.FS
		glob string
	}{{migrations, "migrations_pg/*.sql"}} {
		files, err := fs.Glob(set.fsys, set.glob)
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v %v", set.glob, files, err)
		}
		sort.Strings(files)
		if err := sqlcore.CheckMigrationNumbers(files); err != nil {
			t.Errorf("%s: %v", set.glob, err)
		}
	}
}
