package broker

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// BulkResult counts what a bulk action did: messages replayed or dead
// letters deleted (Done), ids that had no dead letter any more (Skipped),
// and those left untouched by an error (Failed).
type BulkResult struct {
	Done    int
	Skipped int
	Failed  int
}

// MaxBulkIDs caps the ids one bulk call may name; larger sets go by filter.
const MaxBulkIDs = 10000

// ReplayIDs replays the dead-lettered messages named by id, in
// transactions of up to a thousand. Each message is replayed exactly once
// or not at all.
func (b *Broker) ReplayIDs(ctx context.Context, ids []string, actor string) (BulkResult, error) {
	return b.bulkIDs(ctx, ids, actor, AuditReplay, func(ctx context.Context, tx Tx, now time.Time, dls []DeadLetter) (string, error) {
		res, err := replay(ctx, tx, now, dls)
		return res.Queue, err
	})
}

// DeleteIDs deletes the dead letters of the messages named by id: every
// group's, or only group's when set.
func (b *Broker) DeleteIDs(ctx context.Context, ids []string, group, actor string) (BulkResult, error) {
	return b.bulkIDs(ctx, ids, actor, AuditDelete, func(ctx context.Context, tx Tx, now time.Time, dls []DeadLetter) (string, error) {
		if group != "" {
			if dls = onlyGroup(dls, group); len(dls) == 0 {
				return "", errorf(ErrNotFound, "no dead letter in group")
			}
		}
		return dls[0].Queue, removeDeadLetters(ctx, tx, dls, Stats{Deleted: 1})
	})
}

type bulkFunc func(ctx context.Context, tx Tx, now time.Time, dls []DeadLetter) (queue string, err error)

func (b *Broker) bulkIDs(ctx context.Context, ids []string, actor, action string, fn bulkFunc) (BulkResult, error) {
	var res BulkResult
	if len(ids) == 0 {
		return res, errorf(ErrInvalid, "ids: at least one is required")
	}
	if len(ids) > MaxBulkIDs {
		return res, errorf(ErrInvalid, "ids: at most %d per call; use a filter for more", MaxBulkIDs)
	}
	ids = uniqueStrings(ids)
	ctx = LowPriority(ctx)
	for start := 0; start < len(ids); start += bulkChunk {
		chunk := ids[start:min(start+bulkChunk, len(ids))]
		var done, skipped int
		err := b.update(ctx, func(tx Tx, touched func(string)) error {
			now := b.now()
			done, skipped = 0, 0
			queues := map[string]int{}
			for _, id := range chunk {
				dls, err := deadLettersOf(ctx, tx, id)
				if err == nil {
					var q string
					q, err = fn(ctx, tx, now, dls)
					if err == nil {
						done++
						queues[q]++
						touched(q)
						continue
					}
				}
				if isNotFound(err) {
					skipped++
					continue
				}
				return err
			}
			return auditBulk(ctx, tx, now, actor, action, queues, fmt.Sprintf("%d of %d ids by list", done, len(chunk)))
		})
		if err != nil {
			res.Failed += len(ids) - start
			return res, fmt.Errorf("bulk %s: %w", action, err)
		}
		res.Done += done
		res.Skipped += skipped
	}
	return res, nil
}

// ReplayMatching replays every dead-lettered message that q selects (its
// paging fields are ignored), in transactions of up to a thousand, so that
// producers are not held up. Dead letters filed after the call began are
// left alone: a replayed copy that fails again is not replayed again here.
func (b *Broker) ReplayMatching(ctx context.Context, q DLQQuery, actor string) (BulkResult, error) {
	return b.bulkMatching(ctx, q, actor, AuditReplay, true)
}

// DeleteMatching deletes every dead letter that q selects.
func (b *Broker) DeleteMatching(ctx context.Context, q DLQQuery, actor string) (BulkResult, error) {
	return b.bulkMatching(ctx, q, actor, AuditDelete, false)
}

func (b *Broker) bulkMatching(ctx context.Context, q DLQQuery, actor, action string, isReplay bool) (BulkResult, error) {
	var res BulkResult
	q.Limit, q.Offset, q.After = bulkChunk, 0, nil
	if err := q.validate(); err != nil {
		return res, err
	}
	ctx = LowPriority(ctx)
	var maxID int64
	if err := b.store.View(ctx, func(tx Tx) (err error) {
		maxID, err = tx.MaxDeadLetterID(ctx)
		return err
	}); err != nil {
		return res, fmt.Errorf("bulk %s: %w", action, err)
	}
	for {
		var n int
		err := b.update(ctx, func(tx Tx, touched func(string)) error {
			now := b.now()
			n = 0
			f, ok, err := q.filter(ctx, tx)
			if err != nil || !ok {
				return err
			}
			f.MaxID = maxID
			rows, err := tx.ListDeadLetters(ctx, f, Page{Limit: bulkChunk})
			if err != nil {
				return err
			}
			queues := map[string]int{}
			if !isReplay {
				if len(rows) > 0 {
					if err := removeDeadLetters(ctx, tx, rows, Stats{Deleted: 1}); err != nil {
						return err
					}
				}
				for _, d := range rows {
					queues[d.Queue]++
				}
				n = len(rows)
			} else {
				seen := map[int64]bool{}
				for _, d := range rows {
					if seen[d.Seq] {
						continue
					}
					seen[d.Seq] = true
					// Every group's dead letters of the message go with it.
					dls, err := tx.DeadLettersOfMessage(ctx, d.Seq)
					if err != nil {
						return err
					}
					res, err := replay(ctx, tx, now, dls)
					if err != nil {
						return err
					}
					queues[res.Queue]++
					touched(res.Queue)
					n++
				}
			}
			if n == 0 {
				return nil
			}
			return auditBulk(ctx, tx, now, actor, action, queues, fmt.Sprintf("%d matching %s", n, q.Describe()))
		})
		if err != nil {
			return res, fmt.Errorf("bulk %s: %w", action, err)
		}
		if n == 0 {
			return res, nil
		}
		res.Done += n
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
}

func auditBulk(ctx context.Context, tx Tx, now time.Time, actor, action string, queues map[string]int, detail string) error {
	n := 0
	var names []string
	for q, c := range queues {
		n += c
		names = append(names, q)
	}
	if n == 0 {
		return nil
	}
	return audit(ctx, tx, now, actor, action, strings.Join(names, ","), "", n, detail)
}

func uniqueStrings(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
