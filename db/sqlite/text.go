package sqlite

import (
	"context"
	"fmt"
	"strconv"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/db/internal/sqlcore"
)

// Search in dead letters (migration 0015): dead_letter_errors indexes each
// dead letter's error text (docid = its id; the text is read from
// dead_letters), dead_letter_payloads the words of each dead-lettered
// message's payload (docid = its seq; once, however many groups gave up
// on it). Both live and die with the dead letters, in the transactions
// that file and remove them: InsertDeadLetter, DeleteDeadLetters (replay
// and delete, one and bulk) and DeleteQueue. No other statement adds or
// removes a dead letter.
//
// On PostgreSQL the two indexes are tables of tsvectors (migrations_pg,
// "Search"), each in a column named after its table as FTS4's hidden
// column is, so that a match is written match(?, index) on both stores
// (SQLite's function form of "index MATCH ?", which its planner takes as
// the same index constraint; PostgreSQL's match is words @@ query). Their
// words are cut and folded in Go as unicode61 cuts and folds them,
// whatever the database's locale (postgres.tsvector, postgres.tsquery).

// payloadWords is the text dead_letter_payloads indexes of message m's
// payload: its object keys and its string and number values, decoded.
const payloadWords = `(SELECT COALESCE(group_concat(
		CASE WHEN typeof(j.key) = 'text' THEN j.key ELSE '' END || ' ' ||
		CASE WHEN j.type IN ('text', 'integer', 'real') THEN j.atom ELSE '' END, ' '), '')
	FROM json_tree(m.payload) j)`

// IndexDeadLetter is sqlcore.Tx's indexDeadLetter on SQLite (FTS4).
func (dialect) IndexDeadLetter(ctx context.Context, t *sqlcore.Tx, d *broker.DeadLetter) error {
	if _, err := t.Exec(ctx, `INSERT INTO dead_letter_errors (docid, error) VALUES (?, ?)`, d.ID, d.Error); err != nil {
		return fmt.Errorf("index the error text: %w", err)
	}
	// The payload is the message's, or, once retention removed the
	// message, the dead letter's own (a restore: migration 0020).
	if _, err := t.Exec(ctx, `INSERT INTO dead_letter_payloads (docid, text)
		SELECT ?1, `+payloadWords+` FROM (SELECT COALESCE((SELECT x.payload FROM messages x WHERE x.seq = ?1),
			(SELECT o.payload FROM dead_letters o WHERE o.id = ?2)) AS payload) m
		WHERE m.payload IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dead_letters o WHERE o.seq = ?1 AND o.id <> ?2)`, d.Seq, d.ID); err != nil {
		return fmt.Errorf("index the payload: %w", err)
	}
	return nil
}

// RebuildTextIndex indexes every dead letter's error text and payload
// again, from nothing, as migration 0015 does: for tools that write dead
// letters with SQL of their own (bench's generator). It is one write
// transaction, as long as the dead letters make it.
func (d *Store) RebuildTextIndex(ctx context.Context) error {
	tx, err := d.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("rebuild the text index: %w", err)
	}
	defer tx.Rollback()
	for _, s := range []string{
		`INSERT INTO dead_letter_errors (dead_letter_errors) VALUES ('rebuild')`,
		`DELETE FROM dead_letter_payloads`,
		`INSERT INTO dead_letter_payloads (docid, text) SELECT m.seq, ` + payloadWords + ` FROM (SELECT d.seq, COALESCE((SELECT x.payload FROM messages x WHERE x.seq = d.seq), MAX(d.payload)) AS payload
			FROM dead_letters d GROUP BY d.seq) m WHERE m.payload IS NOT NULL`,
		`INSERT INTO dead_letter_payloads (dead_letter_payloads) VALUES ('optimize')`,
		`INSERT INTO dead_letter_errors (dead_letter_errors) VALUES ('optimize')`,
	} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("rebuild the text index: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("rebuild the text index: %w", err)
	}
	return nil
}

// Merging the indexes' segments (broker.TextIndexTx). FTS4 keeps each
// index as segments (b-trees of words and their lists of documents) in
// levels: a commit that filed or removed dead letters adds one to level
// 0, and the commit that would add a sixteenth to a level first merges
// the whole level into one segment of the next, in that commit. The
// level that holds most of the index is so rewritten whole from time to
// time, inside the commit of a write that removed or filed a few dead
// letters (157 ms of CPU at 50k dead letters: docs/performance.md, D7).
// FTS4's automerge (migration 0040) does not prevent it: it merges in a
// commit that added many leaves only. Its incremental merge ('merge=X,Y':
// of the oldest segments of the lowest level that holds Y at least, or of
// a merge begun and not finished, X leaves written at most, the rest left
// for the next step, which the index's stat row remembers) keeps each
// level well below sixteen when it is run, a step a low-priority write,
// whenever a level holds textMergeSegments. Below automerge's 8, which
// would merge a level of 8 in a commit that added a few leaves; more than
// a few, since each merge of the level that holds the big segment
// rewrites it (measured: docs/performance.md, D7).
const textMergeSegments = 6

// textIndexes are the full-text indexes, whose shadow tables FTS4 names
// after them (_segdir, _stat).
var textIndexes = [...]string{"dead_letter_errors", "dead_letter_payloads"}

// MergeTextIndex is MergeTextIndex on SQLite: one step of the first index
// with merging due; it reports whether either still has some. With pages
// 0 it only reads whether either has some.
func (dialect) MergeTextIndex(ctx context.Context, t *sqlcore.Tx, pages int) (bool, error) {
	for i, index := range textIndexes {
		due, err := mergeDue(ctx, t, index)
		if err != nil || (due && pages == 0) {
			return due, err
		}
		if !due {
			continue
		}
		var before, after int64
		if err := t.QueryRow(ctx, `SELECT total_changes()`).Scan(&before); err != nil {
			return false, fmt.Errorf("merge the text index: %w", err)
		}
		// The command takes no bound parameter: its numbers are written
		// in (ints, never text from outside).
		cmd := "merge=" + strconv.Itoa(pages) + "," + strconv.Itoa(textMergeSegments)
		if _, err := t.Exec(ctx, `INSERT INTO `+index+` (`+index+`) VALUES ('`+cmd+`')`); err != nil {
			return false, fmt.Errorf("merge %s: %w", index, err)
		}
		if err := t.QueryRow(ctx, `SELECT total_changes()`).Scan(&after); err != nil {
			return false, fmt.Errorf("merge the text index: %w", err)
		}
		// FTS4 says a merge that changed fewer than 2 rows did nothing:
		// what is due cannot be merged now (not asked again until the
		// next writes), rather than asked for ever.
		if after-before >= 2 {
			if due, err = mergeDue(ctx, t, index); err != nil || due {
				return due, err
			}
		}
		for _, next := range textIndexes[i+1:] {
			if due, err := mergeDue(ctx, t, next); err != nil || due {
				return due, err
			}
		}
		return false, nil
	}
	return false, nil
}

// mergeDue reports whether index has merging due: a level of
// textMergeSegments segments or more, or a merge begun (FTS4's hint, the
// stat row 1, not empty). Reads the index's _segdir and _stat only.
func mergeDue(ctx context.Context, t *sqlcore.Tx, index string) (bool, error) {
	var due bool
	err := t.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+index+`_segdir GROUP BY level HAVING count(*) >= ?)
		OR EXISTS (SELECT 1 FROM `+index+`_stat WHERE id = 1 AND length(value) > 0)`, textMergeSegments).Scan(&due)
	if err != nil {
		return false, fmt.Errorf("text index %s: %w", index, err)
	}
	return due, nil
}

// PayloadIndexedInPart is false: FTS4 holds every word.
func (dialect) PayloadIndexedInPart([]byte) bool { return false }

// FileDeadLetters files a dead letter at a time (sqlcore.FileEach):
// SQLite's statements cost no round trip.
func (dialect) FileDeadLetters(ctx context.Context, t *sqlcore.Tx, ds []*broker.DeadLetter) ([]bool, error) {
	return sqlcore.FileEach(ctx, t, ds)
}

// InsertAudits writes an entry at a time (sqlcore.InsertEachAudit).
func (dialect) InsertAudits(ctx context.Context, t *sqlcore.Tx, as []broker.AuditEntry) error {
	return sqlcore.InsertEachAudit(ctx, t, as)
}
