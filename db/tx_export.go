package db

import (
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// blockQuery is the SQL of the rows of docids (newest first) that the
// rest of ph's filter selects, in the docids' order (a message's dead
// letters by row id), up to limit (-1: all): the docids drive (CROSS
// JOIN), each looked up by id or seq; the sort is of the page's rows
// only.
func blockQuery(ph sqlcore.ExportPhase, docids []int64, limit int) (string, []any) {
	return sqlcore.BlockQueryFrom(`FROM json_each(?) k CROSS JOIN dead_letters d ON `, "k.value", ph, docids, limit)
}

// pgBlockQuery is blockQuery on PostgreSQL, whose json_each reads
// objects only: the array's elements numbered in their order (k.key, as
// SQLite's json_each numbers them).
func pgBlockQuery(ph sqlcore.ExportPhase, docids []int64, limit int) (string, []any) {
	return sqlcore.BlockQueryFrom(`FROM json_array_elements_text(CAST(? AS json)) WITH ORDINALITY k(value, key) JOIN dead_letters d ON `,
		"CAST(k.value AS BIGINT)", ph, docids, limit)
}

func (sqliteDialect) BlockQuery(ph sqlcore.ExportPhase, docids []int64, limit int) (string, []any) {
	return blockQuery(ph, docids, limit)
}

func (pgDialect) BlockQuery(ph sqlcore.ExportPhase, docids []int64, limit int) (string, []any) {
	return pgBlockQuery(ph, docids, limit)
}
