package sqlcore

import (
	"strings"
	"testing"
)

// CheckMigrationNumbers takes 1, 2, 3, ... each once, and refuses a
// number twice, a gap, a set that does not start at 1 and a name
// without a number.
func TestCheckMigrationNumbers(t *testing.T) {
	if err := CheckMigrationNumbers([]string{"migrations/0001_a.sql", "migrations/0002_b.sql", "migrations/0003_c.sql"}); err != nil {
		t.Errorf("1, 2, 3 refused: %v", err)
	}
	for _, bad := range [][]string{
		{"migrations/0001_a.sql", "migrations/0002_b.sql", "migrations/0002_c.sql"},
		{"migrations/0001_a.sql", "migrations/0003_c.sql"},
		{"migrations_pg/0002_a.sql"},
		{"migrations/x_a.sql"},
	} {
		err := CheckMigrationNumbers(bad)
		if err == nil {
			t.Errorf("%v: accepted", bad)
		} else if !strings.Contains(err.Error(), "migrate:") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
