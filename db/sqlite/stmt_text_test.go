package sqlite

import (
	"strings"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// stmtText is a composed statement's text and arguments, for a test to
// read, plan or run as it is on SQLite.
func stmtText(s sqlcore.Stmt) (string, []any) { return s.SQL(), s.Args() }

// whereOf is the WHERE clause sqlcore.AddWhere composes of f's
// conditions ("" for none) and its arguments.
func whereOf(f broker.Filter) (string, []any) {
	var s sqlcore.Stmt
	sqlcore.AddWhere(&s, f, false)
	return stmtText(s)
}

// andWhere adds cond to a WHERE clause w (maybe empty).
func andWhere(w, cond string) string {
	if strings.TrimSpace(w) == "" {
		return " WHERE " + cond
	}
	return w + " AND " + cond
}
