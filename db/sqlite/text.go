package sqlite

import (
	"context"
	"database/sql"
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

// IndexDeadLetter is sqlcore.Tx's indexDeadLetter on SQLite: a row of
// the text index's log of additions (search.go), which the indexer applies.
func (d dialect) IndexDeadLetter(ctx context.Context, t *sqlcore.Tx, dl *broker.DeadLetter) error {
	if _, err := t.Exec(ctx, `INSERT INTO text_index_added (dead_letter_id, seq) VALUES (?, ?)`, dl.ID, dl.Seq); err != nil {
		return fmt.Errorf("log the dead letter for the text index: %w", err)
	}
	d.s.noteLogged()
	return nil
}

// UnindexDeadLetters is sqlcore.Tx's unindexDeadLetters on SQLite: a log
// row a dead letter, before the rows go.
func (d dialect) UnindexDeadLetters(ctx context.Context, t *sqlcore.Tx, ids string) error {
	if _, err := t.Exec(ctx, `INSERT INTO text_index_removed (dead_letter_id, seq)
		SELECT id, seq FROM dead_letters WHERE id IN (SELECT value FROM json_each(?))`, ids); err != nil {
		return fmt.Errorf("log the dead letters for the text index: %w", err)
	}
	d.s.noteLogged()
	return nil
}

// UnindexQueue is sqlcore.Tx's unindexQueue on SQLite: a log row a dead
// letter of the queue.
func (d dialect) UnindexQueue(ctx context.Context, t *sqlcore.Tx, queueID int64) error {
	if _, err := t.Exec(ctx, `INSERT INTO text_index_removed (dead_letter_id, seq)
		SELECT id, seq FROM dead_letters WHERE queue_id = ?`, queueID); err != nil {
		return fmt.Errorf("log the queue's dead letters for the text index: %w", err)
	}
	d.s.noteLogged()
	return nil
}

// AwaitTextIndex waits for the indexer to have applied every log row
// committed before (search.go); a dialect of no store (tests) returns at
// once, and so does a write transaction. A write reads the search file
// as it stood when the write began (BEGIN IMMEDIATE takes its snapshot,
// the file being attached read-only), so waiting there would only hold
// every other write back for nothing; what a write reads by text (a
// job's chunk) lies within a bound that a read took before it, and that
// read waited (a job's start counts and bounds its dead letters in a
// View: broker.StartJob).
func (d dialect) AwaitTextIndex(ctx context.Context, t *sqlcore.Tx) error {
	if d.s == nil || t.Scope() != nil {
		return nil
	}
	return d.s.await(ctx, t)
}

// RebuildTextIndex builds the search file's indexes again from the
// dead letters (search.go): for tools that write dead letters with SQL of
// their own (bench's generator), which the text index's log does not
// see. It is one transaction of the search file, as long as the dead
// letters make it.
func (d *Store) RebuildTextIndex(ctx context.Context) error {
	return d.search.rebuild(ctx)
}

// Merging the indexes' segments (the indexer's, search.go). FTS4 keeps
// each index as segments (b-trees of words and their lists of documents)
// in levels: a commit that filed or removed dead letters adds one to
// level 0, and the commit that would add a sixteenth to a level first
// merges the whole level into one segment of the next, in that commit.
// The level that holds most of the index is so rewritten whole from time
// to time (157 ms of CPU at 50k dead letters: docs/performance.md, D7).
// FTS4's incremental merge ('merge=X,Y': of the oldest segments of the
// lowest level that holds Y at least, or of a merge begun and not
// finished, X leaves written at most, the rest left for the next step,
// which the index's stat row remembers) keeps each level well below
// sixteen when it is run, a step a transaction of the indexer, whenever a
// level holds textMergeSegments: more than a few, since each merge of the
// level that holds the big segment rewrites it, and a step writes one
// word's whole list at least. Between the steps the indexer applies the
// log rows that came meanwhile: the reads waiting for them wait for one
// step at most.
const textMergeSegments = 6

// textMergePages is how many pages of merged segments a step writes at
// most (a page of FTS4's is a few KiB; a word's list of documents is
// written whole, so a step writes one word's list at least).
const textMergePages = 8

// textIndexes are the full-text indexes, whose shadow tables FTS4 names
// after them (_segdir, _stat).
var textIndexes = [...]string{"dead_letter_errors", "dead_letter_payloads"}

// querier is what merging needs of a transaction of the search file.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// mergeTextIndex runs one step of the first index with merging due on
// t, a transaction of the search file; it reports whether either still
// has some. With pages 0 it only reads whether either has some.
func mergeTextIndex(ctx context.Context, t querier, pages int) (bool, error) {
	for i, index := range textIndexes {
		due, err := mergeDue(ctx, t, index)
		if err != nil || (due && pages == 0) {
			return due, err
		}
		if !due {
			continue
		}
		var before, after int64
		if err := t.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&before); err != nil {
			return false, fmt.Errorf("merge the text index: %w", err)
		}
		// The command takes no bound parameter: its numbers are written
		// in (ints, never text from outside).
		cmd := "merge=" + strconv.Itoa(pages) + "," + strconv.Itoa(textMergeSegments)
		if _, err := t.ExecContext(ctx, `INSERT INTO main.`+index+` (`+index+`) VALUES ('`+cmd+`')`); err != nil {
			return false, fmt.Errorf("merge %s: %w", index, err)
		}
		if err := t.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&after); err != nil {
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
func mergeDue(ctx context.Context, t querier, index string) (bool, error) {
	var due bool
	err := t.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM main.`+index+`_segdir GROUP BY level HAVING count(*) >= ?)
		OR EXISTS (SELECT 1 FROM main.`+index+`_stat WHERE id = 1 AND length(value) > 0)`, textMergeSegments).Scan(&due)
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
