package db

import (
	"context"
	"strings"

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
// index instead (exportIndexQuery): matching the whole search and
// sorting it by failure time again for every page made an export of n
// matches cost n²; the index hands its matches over in docid order, from
// the cursor's docid down, without a sort, and the page stops at its
// limit. The export's order is then the index's (ExportCursor), not the
// list's newest failure first.
func (t *storeTx) ExportDeadLetters(ctx context.Context, f broker.Filter, after *broker.ExportCursor, limit int, maxBytes int64) ([]broker.DeadLetter, *broker.ExportCursor, error) {
	if !f.Indexed() {
		var cur *broker.Cursor
		if after != nil {
			cur = after.After
		}
		q, args := exportQuery(f, cur, limit)
		out, err := t.exportRows(ctx, q, args, maxBytes)
		if err != nil || len(out) == 0 {
			return nil, nil, err
		}
		last := out[len(out)-1]
		return out, &broker.ExportCursor{After: &broker.Cursor{At: last.FailedAt, ID: last.ID}}, nil
	}
	cur := broker.ExportCursor{}
	if after != nil {
		cur = *after
	}
	phases := exportPhases(f)
	for cur.Phase < len(phases) {
		ph := phases[cur.Phase]
		q, args := exportIndexQuery(f, ph, cur.Below, limit)
		out, err := t.exportRows(ctx, q, args, maxBytes)
		if err != nil {
			return nil, nil, err
		}
		if len(out) == 0 {
			cur.Phase, cur.Below = cur.Phase+1, 0
			continue
		}
		last := out[len(out)-1]
		next := &broker.ExportCursor{Phase: cur.Phase, Below: last.ID}
		if ph.payloads {
			// A message's dead letters (one a group) share its docid: a
			// page cut in the middle of one leaves its rows to the next,
			// which starts at that seq (unless they are the whole page:
			// then they are read to their end here).
			next.Below = last.Seq
			if len(out) == limit || exportSize(out) >= maxBytes {
				keep := len(out)
				for keep > 0 && out[keep-1].Seq == last.Seq {
					keep--
				}
				if keep > 0 {
					out = out[:keep]
					next.Below = last.Seq + 1
				} else if out, err = t.exportSeq(ctx, f, ph, last.Seq); err != nil {
					return nil, nil, err
				}
			}
			if ph.notErrors != "" {
				if out, err = t.withoutErrorMatches(ctx, out, ph.notErrors); err != nil {
					return nil, nil, err
				}
			}
		}
		return out, next, nil
	}
	return nil, nil, nil
}

// exportRows reads the rows of a page query until they add up to maxBytes.
func (t *storeTx) exportRows(ctx context.Context, q string, args []any, maxBytes int64) ([]broker.DeadLetter, error) {
	rows, err := t.query(ctx, q, args...)
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

// exportSeq reads every row of seq an index-driven page selects.
func (t *storeTx) exportSeq(ctx context.Context, f broker.Filter, ph exportPhase, seq int64) ([]broker.DeadLetter, error) {
	q, args := exportIndexQuery(f, ph, seq+1, -1)
	q = strings.Replace(q, " ORDER BY t.docid DESC", " AND t.docid = ? ORDER BY t.docid DESC", 1)
	n := len(args) - 1 // before the LIMIT's
	args = append(append(args[:n:n], seq), args[n])
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanDeadLetters(rows)
}

// withoutErrorMatches drops the dead letters whose error text matches
// match: the payload phase of free text leaves out those the error phase
// exported. One pass of the index, filtered by the page's ids.
func (t *storeTx) withoutErrorMatches(ctx context.Context, dls []broker.DeadLetter, match string) ([]broker.DeadLetter, error) {
	if len(dls) == 0 {
		return dls, nil
	}
	ids := make([]int64, len(dls))
	for i, d := range dls {
		ids[i] = d.ID
	}
	rows, err := t.query(ctx, `SELECT docid FROM dead_letter_errors WHERE dead_letter_errors MATCH ? AND docid IN (SELECT value FROM json_each(?))`, match, intsJSON(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	drop := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		drop[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := dls[:0]
	for _, d := range dls {
		if !drop[d.ID] {
			out = append(out, d)
		}
	}
	return out, nil
}

// exportPhase is one index an index-driven export walks: its match, and
// the filter left to check on each row.
type exportPhase struct {
	payloads  bool   // the payloads' index (docid = seq), else the error texts' (docid = id)
	match     string // what the index matches
	rest      broker.Filter
	notErrors string // leave out rows whose error text matches it (in Go: withoutErrorMatches)
	exceptIDs string // a JSON array of row ids to leave out (DeadLetterKeys)
}

// exportPhases are the indexes an export of f (f.Indexed()) walks: free
// text, in the error texts' then the payloads' index; else the first
// field filter with words, in the payloads' index.
func exportPhases(f broker.Filter) []exportPhase {
	rest := f
	rest.Floor, rest.Window, rest.MatchCap = nil, nil, 0
	if f.Text != "" {
		rest.Text = ""
		return []exportPhase{{match: f.Text, rest: rest}, {payloads: true, match: f.Text, rest: rest, notErrors: f.Text}}
	}
	rest.Fields = append([]broker.FieldFilter(nil), f.Fields...)
	for i, ff := range rest.Fields {
		if ff.Words != "" {
			rest.Fields[i].Words = "" // the index walked: its exact test stays
			return []exportPhase{{payloads: true, match: ff.Words, rest: rest}}
		}
	}
	return nil
}

// exportIndexQuery is the SQL of an index-driven page: the index walked
// first (CROSS JOIN keeps it outer), its matches below below (0: all)
// newest docid first as it hands them over (no sort), each joined to its
// dead letters and checked against the rest of the filter. limit -1: no
// limit.
func exportIndexQuery(f broker.Filter, ph exportPhase, below int64, limit int) (string, []any) {
	return indexQuery(deadLetterSelect, ph, below, limit)
}

// indexQuery is exportIndexQuery with sel's columns (a SELECT ... FROM
// dead_letters d ...).
func indexQuery(sel string, ph exportPhase, below int64, limit int) (string, []any) {
	index, join := "dead_letter_errors", "d.id = t.docid"
	if ph.payloads {
		index, join = "dead_letter_payloads", "d.seq = t.docid"
	}
	w, args := where(ph.rest)
	from := `FROM ` + index + ` t CROSS JOIN dead_letters d ON ` + join
	q := strings.Replace(sel, "FROM dead_letters d", from, 1)
	cond := `t.` + index + ` MATCH ?`
	cargs := []any{ph.match}
	if below > 0 {
		cond += ` AND t.docid < ?`
		cargs = append(cargs, below)
	}
	if ph.exceptIDs != "" {
		cond += ` AND d.id NOT IN (SELECT value FROM json_each(?))`
		cargs = append(cargs, ph.exceptIDs)
	}
	if w == "" {
		w = " WHERE " + cond
	} else {
		w = " WHERE " + cond + " AND " + strings.TrimPrefix(w, " WHERE ")
	}
	return q + w + ` ORDER BY t.docid DESC LIMIT ?`, append(append(cargs, args...), limit)
}

// exportQuery is the SQL of a list-ordered page of ExportDeadLetters.
func exportQuery(f broker.Filter, after *broker.Cursor, limit int) (string, []any) {
	w, args := where(f)
	if after != nil {
		if w == "" {
			w = " WHERE "
		} else {
			w += " AND "
		}
		w += "(d.failed_at, d.id) < (?, ?)"
		args = append(args, ms(after.At), after.ID)
	}
	return deadLetterSelect + w + ` ORDER BY d.failed_at DESC, d.id DESC LIMIT ?`, append(args, limit)
}
