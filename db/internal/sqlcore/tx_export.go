package sqlcore

import (
	"context"
	"slices"

	"github.com/lazarus-dlq/lazarus/broker"
)

// ExportDeadLetters reads a page of an export, cut by bytes: rows are
// read one at a time and the page ends after the row that brings the
// payloads and errors to maxBytes, so that a page of big payloads holds
// maxBytes and one row at most.
//
// A filter with no full-text condition is ListDeadLetters' keyset page
// (the same WHERE and ORDER BY, the same indexes: see TestExportPlans).
// One with free text or a field filter's words is driven by a full-text
// index instead (IndexStmt): matching the whole search and
// sorting it by failure time again for every page made an export of n
// matches cost n²; the index hands its matches over in docid order, from
// the cursor's docid down, without a sort, and the page stops at its
// limit. The export's order is then the index's (ExportCursor), not the
// list's newest failure first.
//
// An export reads every page of its rows once: it reads them through
// a small cache of pages (ReadOnce), not the connection's usual one,
// which a long export would fill (32 MB on SQLite) for nothing.
//
// A page after one that waited for the full-text indexes
// (after.Settled) does not wait again when the export is bounded
// (f.MaxID, taken before that wait): every dead letter up to the bound
// was in them then. That holds because a dead letter is added with an
// id of its own, above every one before (AUTOINCREMENT, a restore's
// too), and no write changes the words of one (retention's copy of a
// payload keeps them): a change that broke either would have a later
// page miss rows. Only an export's first page can be refused for an
// indexer behind (AwaitTextIndex), before anything was sent.
func (t *Tx) ExportDeadLetters(ctx context.Context, f broker.Filter, after *broker.ExportCursor, limit int, maxBytes int64) (out []broker.DeadLetter, next *broker.ExportCursor, err error) {
	settled := after != nil && after.Settled && f.MaxID > 0
	t.settled, t.awaited = settled, false
	defer func() {
		if next != nil {
			next.Settled = settled || t.awaited
		}
		t.settled, t.awaited = false, false
	}()
	err = t.d.ReadOnce(ctx, t, func() (err error) {
		if !f.ByIndex() {
			out, next, err = t.exportByList(ctx, f, after, limit, maxBytes)
		} else {
			out, next, err = t.exportByIndex(ctx, f, after, limit, maxBytes)
		}
		return err
	})
	return out, next, err
}

// exportByList is ExportDeadLetters of a filter with no full-text
// condition: ListDeadLetters' keyset page, from the cursor's failure time
// and row id down; the next page starts after its last row.
func (t *Tx) exportByList(ctx context.Context, f broker.Filter, after *broker.ExportCursor, limit int, maxBytes int64) ([]broker.DeadLetter, *broker.ExportCursor, error) {
	var cur *broker.Cursor
	if after != nil {
		cur = after.After
	}
	s := ExportStmt(f, cur, limit)
	out, err := t.exportRows(ctx, &s, maxBytes)
	if err != nil || len(out) == 0 {
		return nil, nil, err
	}
	last := out[len(out)-1]
	return out, &broker.ExportCursor{After: &broker.Cursor{At: last.FailedAt, ID: last.ID}}, nil
}

// exportByIndex is ExportDeadLetters driven by a full-text index: phase
// by phase (exportPhases), it reads a block of the index's docids at a
// time (readBlock) and the rows of the block's next docids
// (exportFromBlock), until a page has rows. A page that would read more
// than exportBlockReads blocks comes back empty, not the last.
func (t *Tx) exportByIndex(ctx context.Context, f broker.Filter, after *broker.ExportCursor, limit int, maxBytes int64) ([]broker.DeadLetter, *broker.ExportCursor, error) {
	cur := broker.ExportCursor{}
	if after != nil {
		cur = *after
	}
	phases := ExportPhases(f)
	for reads := 0; cur.Phase < len(phases); {
		ph := phases[cur.Phase]
		if len(cur.Pending) == 0 {
			if reads == ExportBlockReads {
				return nil, &cur, nil // an empty page, not the last: the next goes on
			}
			reads++
			if err := t.readBlock(ctx, ph, &cur); err != nil {
				return nil, nil, err
			}
			if len(cur.Pending) == 0 {
				continue // the phase is done: the next one's first block
			}
		}
		out, err := t.exportFromBlock(ctx, ph, &cur, limit, maxBytes)
		if err != nil {
			return nil, nil, err
		}
		if len(out) > 0 {
			return out, &cur, nil
		}
	}
	return nil, nil, nil
}

// readBlock reads the next block of ph's index below cur.Below into
// cur.Pending, with (a payload phase after the error phase) the ids of
// its rows whose error text matched, which that phase exported already
// (cur.Skip). When the index has no more, cur moves on to the next
// phase, from its start.
func (t *Tx) readBlock(ctx context.Context, ph ExportPhase, cur *broker.ExportCursor) error {
	block, err := t.indexBlock(ctx, ph, cur.Below)
	if err != nil {
		return err
	}
	if len(block) == 0 {
		*cur = broker.ExportCursor{Phase: cur.Phase + 1}
		return nil
	}
	cur.Pending, cur.Below, cur.Skip = block, block[len(block)-1], nil
	if ph.notErrors != "" {
		if cur.Skip, err = t.errorMatchesOf(ctx, ph.notErrors, block); err != nil {
			return err
		}
	}
	return nil
}

// exportFromBlock reads the rows of up to limit of cur.Pending's docids
// that the rest of ph's filter selects, cut by limit and maxBytes
// (cutAtDoc), and takes the docids it read to their end off
// cur.Pending; rows of cur.Skip are left out. The rows may be none
// (the docids' rows did not match the rest of the filter).
func (t *Tx) exportFromBlock(ctx context.Context, ph ExportPhase, cur *broker.ExportCursor, limit int, maxBytes int64) ([]broker.DeadLetter, error) {
	take := cur.Pending[:min(len(cur.Pending), limit)]
	s := t.d.BlockStmt(ph, take, limit)
	out, err := t.exportRows(ctx, &s, maxBytes)
	if err != nil {
		return nil, err
	}
	consumed := len(take)
	if len(out) > 0 && (len(out) == limit || exportSize(out) >= maxBytes) {
		// Cut early: the docids up to the last row's are done.
		var doc int64
		if out, doc, err = t.cutAtDoc(ctx, ph, out); err != nil {
			return nil, err
		}
		consumed = slices.Index(take, doc) + 1
	}
	cur.Pending = cur.Pending[consumed:]
	if len(cur.Skip) > 0 {
		out = slices.DeleteFunc(out, func(d broker.DeadLetter) bool {
			_, found := slices.BinarySearch(cur.Skip, d.ID)
			return found
		})
	}
	return out, nil
}

// cutAtDoc ends a page cut early (by limit or bytes) at a whole docid,
// and returns the last docid it holds to its end. A message's dead
// letters (one a group) share its docid in the payload index: a page cut
// in the middle of them leaves them to the next page, unless they are
// the whole page (then read to their end, past the cut).
func (t *Tx) cutAtDoc(ctx context.Context, ph ExportPhase, out []broker.DeadLetter) ([]broker.DeadLetter, int64, error) {
	last := out[len(out)-1]
	if !ph.payloads {
		return out, last.ID, nil
	}
	doc := last.Seq
	keep := len(out)
	for keep > 0 && out[keep-1].Seq == doc {
		keep--
	}
	if keep > 0 {
		return out[:keep], out[keep-1].Seq, nil
	}
	s := t.d.BlockStmt(ph, []int64{doc}, -1)
	rows, err := t.QueryStmt(ctx, &s)
	if err != nil {
		return nil, 0, err
	}
	if out, err = scanDeadLetters(rows); err != nil {
		return nil, 0, err
	}
	return out, doc, nil
}

// An index-driven export reads exportBlock docids of the index at a time
// (one pass over the index's doclist each: a page's pass made an export
// of n matches cost n²/limit), and at most exportBlockReads blocks for
// one page (a filter that leaves out most matches returns an empty page
// that goes on rather than hold the read transaction long).
// (Variables: a test makes them small.)
var (
	ExportBlock      = 20000
	ExportBlockReads = 8
)

// indexBlock reads the next block of ph's index: up to exportBlock
// docids below below (0: from the newest), newest first, as the index
// hands them over (no sort).
func (t *Tx) indexBlock(ctx context.Context, ph ExportPhase, below int64) ([]int64, error) {
	if err := t.awaitText(ctx); err != nil {
		return nil, err
	}
	q, args := IndexBlockQuery(ph, below)
	return t.QueryIDs(ctx, q, args...)
}

// IndexBlockQuery is indexBlock's SQL.
func IndexBlockQuery(ph ExportPhase, below int64) (string, []any) {
	index := "dead_letter_errors"
	if ph.payloads {
		index = "dead_letter_payloads"
	}
	q := `SELECT docid FROM ` + index + ` WHERE match(?, ` + index + `)`
	args := []any{FTSMatch(ph.match)}
	if below > 0 {
		q += ` AND docid < ?`
		args = append(args, below)
	}
	return q + ` ORDER BY docid DESC LIMIT ?`, append(args, ExportBlock)
}

// errorMatchesOf returns the sorted ids of the dead letters of the
// messages seqs whose error text matches match: one pass of the index,
// filtered by the block's rows.
func (t *Tx) errorMatchesOf(ctx context.Context, match string, seqs []int64) ([]int64, error) {
	if err := t.awaitText(ctx); err != nil {
		return nil, err
	}
	out, err := t.QueryIDs(ctx, errorMatchesQuery, FTSMatch(match), IntsJSON(seqs))
	slices.Sort(out)
	return out, err
}

// errorMatchesQuery is errorMatchesOf's SQL (PostgreSQL's json_each
// reads objects only).
var errorMatchesQuery = PGQuery(`SELECT docid FROM dead_letter_errors WHERE match(?, dead_letter_errors)
		AND docid IN (SELECT d.id FROM json_each(?) k CROSS JOIN dead_letters d ON d.seq = k.value)`,
	`SELECT docid FROM dead_letter_errors WHERE match(?, dead_letter_errors)
		AND docid IN (SELECT d.id FROM json_array_elements_text(CAST(? AS json)) k(value) JOIN dead_letters d ON d.seq = CAST(k.value AS BIGINT))`)

// exportRows reads the rows of a page's statement until they add up to
// maxBytes.
func (t *Tx) exportRows(ctx context.Context, s *Stmt, maxBytes int64) ([]broker.DeadLetter, error) {
	rows, err := t.QueryStmt(ctx, s)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.DeadLetter
	var size int64
	for size < maxBytes && rows.Next() {
		var d broker.DeadLetter
		if err := scanDeadLetter(rows, &d); err != nil {
			return nil, err
		}
		size += int64(len(d.Payload) + len(d.Error))
		out = append(out, d)
	}
	return out, rows.Err()
}

func exportSize(dls []broker.DeadLetter) (n int64) {
	for _, d := range dls {
		n += int64(len(d.Payload) + len(d.Error))
	}
	return n
}

// ExportPhase is one index an index-driven export walks: its match, and
// the filter left to check on each row.
type ExportPhase struct {
	payloads  bool   // the payloads' index (docid = seq), else the error texts' (docid = id)
	match     string // what the index matches
	rest      broker.Filter
	notErrors string // leave out rows whose error text matches it (in Go: withoutErrorMatches)
	exceptIDs string // a JSON array of row ids to leave out (DeadLetterKeys)
}

// ExportPhases are the indexes an export of f (f.ByIndex()) walks: free
// text, in the error texts' then the payloads' index; else an error
// text's words (ErrorWords), in the error texts' index (the text itself
// checked on each, by the rest of the filter); else the first field
// filter with words, in the payloads' index.
func ExportPhases(f broker.Filter) []ExportPhase {
	rest := f
	rest.Floor, rest.Window, rest.MatchCap = nil, nil, 0
	if f.Text != "" {
		rest.Text = ""
		return []ExportPhase{{match: f.Text, rest: rest}, {payloads: true, match: f.Text, rest: rest, notErrors: f.Text}}
	}
	if f.ErrorWords != "" {
		rest.ErrorWords = "" // the index walked: ErrorContains stays, exact
		return []ExportPhase{{match: f.ErrorWords, rest: rest}}
	}
	rest.Fields = append([]broker.FieldFilter(nil), f.Fields...)
	for i, ff := range rest.Fields {
		if ff.Words != "" {
			rest.Fields[i].Words = "" // the index walked: its exact test stays
			return []ExportPhase{{payloads: true, match: ff.Words, rest: rest}}
		}
	}
	return nil
}

// IndexStmt is the statement of the dead letters' keys (KeySelect's
// columns) of ph's index matches below below (0: all): the index walked
// first (CROSS JOIN keeps it outer), newest docid first as it hands them
// over (no sort), each match joined to its dead letters and checked
// against the rest of the filter, up to limit (-1: all).
// DeadLetterKeys' chunks.
func IndexStmt(ph ExportPhase, below int64, limit int) Stmt {
	var s Stmt
	s.ReadsText()
	if ph.payloads {
		s.Add(idxKeysOfPayloads)
		s.Cond(idxMatchPayloads, FTSMatch(ph.match))
	} else {
		s.Add(idxKeysOfErrors)
		s.Cond(idxMatchErrors, FTSMatch(ph.match))
	}
	if below > 0 {
		s.Cond(idxBelow, below)
	}
	if ph.exceptIDs != "" {
		s.Cond(idxExceptIDs, ph.exceptIDs)
	}
	AddWhere(&s, ph.rest, true)
	s.Add(idxNewestFirst, limit)
	return s
}

// The fragments of IndexStmt, ExportStmt and BlockStmt.
const (
	idxKeysOfErrors   Frag = `SELECT d.id, d.seq, d.queue_id, d.partition_id, d.group_id, 0, d.fingerprint, 0 FROM dead_letter_errors t CROSS JOIN dead_letters d ON d.id = t.docid`
	idxKeysOfPayloads Frag = `SELECT d.id, d.seq, d.queue_id, d.partition_id, d.group_id, 0, d.fingerprint, 0 FROM dead_letter_payloads t CROSS JOIN dead_letters d ON d.seq = t.docid`
	idxMatchErrors    Frag = `match(?, t.dead_letter_errors)`
	idxMatchPayloads  Frag = `match(?, t.dead_letter_payloads)`
	idxBelow          Frag = `t.docid < ?`
	idxExceptIDs      Frag = `d.id NOT IN (SELECT value FROM json_each(?))`
	idxNewestFirst    Frag = ` ORDER BY t.docid DESC LIMIT ?`
	blockInOrder      Frag = ` ORDER BY k.key, d.id DESC LIMIT ?`
)

// ExportStmt is the statement of a list-ordered page of
// ExportDeadLetters.
func ExportStmt(f broker.Filter, after *broker.Cursor, limit int) Stmt {
	s := deadLetterStmt(dlSelect, f)
	if after != nil {
		s.Cond(dlBefore, MS(after.At), after.ID)
	}
	s.Add(dlNewestFirst, limit)
	return s
}

// BlockStmt is a store's statement of a block of dead letters in the
// export's phase ph (Dialect.BlockStmt): head reads the docids (the
// store's way to read a JSON array with its keys, k.key) and joins each
// to its dead letters (DeadLetterCols … DeadLetterJoins), by id or by
// seq as ph walks the error texts' index or the payloads'.
func BlockStmt(head Frag, ph ExportPhase, docids []int64, limit int) Stmt {
	if limit < 0 {
		limit = NoCap
	}
	var s Stmt
	s.Add(head, IntsJSON(docids))
	AddWhere(&s, ph.rest, true)
	s.Add(blockInOrder, limit)
	return s
}

// Payloads reports whether the phase walks the payloads' index (docid =
// seq), else the error texts' (docid = id).
func (p ExportPhase) Payloads() bool { return p.payloads }
