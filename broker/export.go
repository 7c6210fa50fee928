package broker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// AuditExport is the audit action of an export of dead letters: one entry
// as it starts (count 0, the filter in words) and one as it ends, with
// the dead letters written (count) and whether it was complete or cut off.
const AuditExport = "export"

// An export reads pages of at most exportRows dead letters, each ending
// once its payloads and errors pass exportBytes: the memory an export
// holds is a page, whatever the number of rows and their sizes.
const (
	exportRows  = 500
	exportBytes = 4 << 20
)

// ExportResult is what an export wrote.
type ExportResult struct {
	Rows     int64
	Complete bool // every dead letter the filter selected was handed over
}

// Export hands every dead letter q selects (Limit, Offset and After are
// ignored) to emit, newest failure first (with free text or a field
// filter's words: in the full-text index's order, newest filed first by
// error text, then by payload; see ExportCursor, which keeps each page
// from matching and sorting the whole search again), a page at a time, and records
// it in the audit under actor: an entry as it starts, naming format and
// the filter, and one as it ends, with the rows written, "cut off after
// N" when emit failed or ctx ended first (a client gone). That second
// entry is written whatever ctx says. emit returns how many rows of the
// page it wrote in full, all unless it fails.
//
// Each page is read in its own read transaction (a keyset page of the
// list), so that an export as slow as its client never holds a snapshot
// that keeps the write-ahead log from being checkpointed. A dead letter
// filed during the export fails later than the first page's newest, so
// it is not exported; one replayed or deleted before its page is read is
// not either. emit is called outside any transaction and must not keep
// the page.
func (b *Broker) Export(ctx context.Context, q DLQQuery, format, actor string, emit func([]DeadLetter) (int, error)) (ExportResult, error) {
	q.Limit, q.Offset, q.After, q.WithTotal = exportRows, 0, nil, false
	if err := q.validate(); err != nil {
		return ExportResult{}, err
	}
	// The filter first: one the export refuses (checkErrorScan) is no
	// export, and leaves nothing in the audit.
	f, ok, err := b.exportFilter(ctx, q)
	if err != nil {
		return ExportResult{}, err
	}
	what := format + " export of " + q.Describe()
	if err := b.update(ctx, func(tx Tx, _ func(string)) error {
		return audit(ctx, tx, b.now(), actor, AuditExport, q.Queue, q.Group, 0, what+": started")
	}); err != nil {
		return ExportResult{}, fmt.Errorf("export: audit: %w", err)
	}
	res, err := b.export(ctx, f, ok, emit)
	detail := fmt.Sprintf("%s: %d dead letters", what, res.Rows)
	if !res.Complete {
		why := "the client went away"
		if err != nil && ctx.Err() == nil && !errors.Is(err, errEmit) {
			why = "a storage error"
		}
		detail = fmt.Sprintf("%s: cut off after %d dead letters (%s)", what, res.Rows, why)
	}
	// The end is recorded also when the request's context is over.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if aerr := b.update(actx, func(tx Tx, _ func(string)) error {
		return audit(actx, tx, b.now(), actor, AuditExport, q.Queue, q.Group, int(res.Rows), detail)
	}); aerr != nil && err == nil {
		err = fmt.Errorf("export: audit: %w", aerr)
	}
	return res, err
}

// errEmit marks an error of Export's emit (writing to the client).
var errEmit = errors.New("export: write")

// exportFilter is q's filter for an export (bulkFilter: an error text's
// words looked up in the index), refused when its error text would read
// too much (checkErrorScan); ok is false when nothing can match.
func (b *Broker) exportFilter(ctx context.Context, q DLQQuery) (f Filter, ok bool, err error) {
	err = b.store.View(ctx, func(tx Tx) (err error) {
		if f, ok, err = q.bulkFilter(ctx, tx); err != nil || !ok {
			return err
		}
		if err := checkErrorScan(ctx, tx, f); err != nil {
			return err
		}
		if f.ByIndex() {
			// In the full-text index's order, a dead letter filed during
			// the export could come in a later phase: the export keeps to
			// the rows there as it starts.
			f.MaxID, err = tx.MaxDeadLetterID(ctx)
		}
		return err
	})
	if err != nil {
		err = fmt.Errorf("export: filter: %w", err)
	}
	return f, ok, err
}

func (b *Broker) export(ctx context.Context, f Filter, ok bool, emit func([]DeadLetter) (int, error)) (ExportResult, error) {
	var res ExportResult
	if !ok {
		res.Complete = true // a queue, group or partition that does not exist: nothing
		return res, nil
	}
	var after *ExportCursor
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		var page []DeadLetter
		var next *ExportCursor
		if err := b.store.View(ctx, func(tx Tx) (err error) {
			if page, next, err = tx.ExportDeadLetters(ctx, f, after, exportRows, exportBytes); err != nil {
				return err
			}
			return stampExpiry(ctx, tx, page)
		}); err != nil {
			return res, fmt.Errorf("export: page: %w", err)
		}
		if len(page) > 0 {
			n, err := emit(page)
			res.Rows += int64(n)
			if err != nil {
				return res, fmt.Errorf("%w: %w", errEmit, err)
			}
		}
		if next == nil {
			res.Complete = true
			return res, nil
		}
		after = next
	}
}
