package db

import (
	"strings"
	"unicode/utf8"
)

// pgText is an error text or fingerprint as PostgreSQL can hold it: its
// text has no NUL and is UTF-8, so each NUL and each run of bytes that is
// not UTF-8 is U+FFFD (the error is a stranger's, and a failed ack must
// still be recorded). A fingerprint made of the text so changed is the
// fingerprint of the text changed likewise, so an error group stays one.
// SQLite keeps every byte.
func pgText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
