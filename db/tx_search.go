package db

import (
	"strings"
	"unicode/utf8"
)

func (sqliteDialect) HoldsNone(string) bool { return false }

func (pgDialect) HoldsNone(s string) bool {
	return !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0
}
