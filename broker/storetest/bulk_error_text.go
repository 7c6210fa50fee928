package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// scanRecorder is a store that records each read of dead letters by a
// filter (a count, a chunk's keys, an export page, the newest failure, a
// canary's draw) whose error text is checked without the index: such a
// read walks every dead letter of the other filters (a whole group).
type scanRecorder struct {
	broker.Store
	mu    sync.Mutex
	scans []string
}

func (r *scanRecorder) View(ctx context.Context, fn func(broker.Tx) error) error {
	return r.Store.View(ctx, func(tx broker.Tx) error { return fn(scanTx{tx, r}) })
}

func (r *scanRecorder) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	return r.Store.Update(ctx, o, func(tx broker.Tx) error { return fn(scanTx{tx, r}) })
}

func (r *scanRecorder) note(read string, f broker.Filter) {
	if f.ErrorContains != "" && f.ErrorWords == "" && f.TransactionID == "" && !f.Indexed() && f.Window == nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.scans = append(r.scans, read+" "+f.ErrorContains)
	}
}

func (r *scanRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.scans
	r.scans = nil
	return out
}

type scanTx struct {
	broker.Tx
	r *scanRecorder
}

func (t scanTx) CountDeadLetters(ctx context.Context, f broker.Filter) (int64, error) {
	t.r.note("CountDeadLetters", f)
	return t.Tx.CountDeadLetters(ctx, f)
}

func (t scanTx) CountDeadLetterMessages(ctx context.Context, f broker.Filter) (int64, error) {
	t.r.note("CountDeadLetterMessages", f)
	return t.Tx.CountDeadLetterMessages(ctx, f)
}

func (t scanTx) DeadLetterKeys(ctx context.Context, f broker.Filter, limit int) ([]broker.DeadLetterKey, error) {
	t.r.note("DeadLetterKeys", f)
	return t.Tx.DeadLetterKeys(ctx, f, limit)
}

func (t scanTx) ExportDeadLetters(ctx context.Context, f broker.Filter, after *broker.ExportCursor, limit int, maxBytes int64) ([]broker.DeadLetter, *broker.ExportCursor, error) {
	t.r.note("ExportDeadLetters", f)
	return t.Tx.ExportDeadLetters(ctx, f, after, limit, maxBytes)
}

func (t scanTx) ListDeadLetters(ctx context.Context, f broker.Filter, p broker.Page) ([]broker.DeadLetter, error) {
	t.r.note("ListDeadLetters", f)
	return t.Tx.ListDeadLetters(ctx, f, p)
}

func (t scanTx) CountDeadLettersUpTo(ctx context.Context, f broker.Filter, max int) (int64, error) {
	t.r.note("CountDeadLettersUpTo", f)
	return t.Tx.CountDeadLettersUpTo(ctx, f, max)
}

func (t scanTx) NewestFailure(ctx context.Context, f broker.Filter) (time.Time, bool, error) {
	t.r.note("NewestFailure", f)
	return t.Tx.NewestFailure(ctx, f)
}

func (t scanTx) DrawDeadLetterKeys(ctx context.Context, d broker.DrawKeys) ([]broker.DeadLetterKey, error) {
	t.r.note("DrawDeadLetterKeys", d.Filter)
	return t.Tx.DrawDeadLetterKeys(ctx, d)
}

// A bulk action and an export by "Error contains" (issue 30): a text
// with whole words is looked up by them in the error texts' index, the
// count, the chunks and the export pages alike, never checked on every
// dead letter of the queue, and acts on exactly what it holds, common
// words or rare; a text with no such word is refused (ErrInvalid, saying
// what to type) when the other filters select more than FieldScan dead
// letters, and checked on each when they select fewer. (Not parallel:
// it makes the search's limits small.)
func testBulkByErrorTextUsesTheIndex(t *testing.T, harness Harness) {
	defer broker.SetSearchLimits(5, 10)()
	s := setup(t, harness)
	texts := make([]string, 30)
	for n := range texts {
		texts[n] = "upstream timeout (504) calling payments-api"
	}
	texts[3] = "the needle: found, in a haystack"
	fileErrors(s, texts)
	rec := &scanRecorder{Store: s.db}
	b := broker.New(broker.Config{Store: rec, Clock: s.clock})
	defer b.Close()
	count := func(text string) (broker.Counted, error) {
		return b.CountMatching(s.ctx, broker.DLQQuery{Queue: "q", ErrorContains: text})
	}
	export := func(text string) (int64, error) {
		res, err := b.Export(s.ctx, broker.DLQQuery{Queue: "q", ErrorContains: text}, "NDJSON", "op", func(page []broker.DeadLetter) (int, error) {
			for _, d := range page {
				if !strings.Contains(d.Error, strings.TrimSpace(text)) {
					t.Errorf("export of %q: %q", text, d.Error)
				}
			}
			return len(page), nil
		})
		return res.Rows, err
	}

	// Words, rare and common (30 timeouts, more than MatchCap's 5): the
	// index, exactly.
	for _, c := range []struct {
		text string
		want int64
	}{{"the needle: found,", 1}, {" timeout (504) ", 29}, {" timeout (503)", 0}, {"needle: found, in a hay", 1}} {
		n, err := count(c.text)
		if err != nil || n.Count != c.want {
			t.Errorf("count of %q: %+v, %v; want %d", c.text, n, err, c.want)
		}
		q := broker.DLQQuery{Queue: "q", ErrorContains: c.text}
		if p, err := b.Preview(s.ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &q}); err != nil || p.DeadLetters != c.want || len(p.Sample) != int(min(c.want, broker.PreviewSampleSize)) {
			t.Errorf("preview of %q: %d dead letters, %d in the sample, %v; want %d", c.text, p.DeadLetters, len(p.Sample), err, c.want)
		}
		if rows, err := export(c.text); err != nil || rows != c.want {
			t.Errorf("export of %q: %d rows, %v; want %d", c.text, rows, err, c.want)
		}
		if got := rec.take(); len(got) > 0 {
			t.Errorf("%q: read without the index: %v", c.text, got)
		}
	}

	// No word the index can look up, over 30 dead letters (more than the
	// window of 10): refused, saying what to type; nothing exported.
	for _, text := range []string{"needle", "imeou", "ayst"} {
		_, err := count(text)
		if !errors.Is(err, broker.ErrInvalid) || !strings.Contains(err.Error(), "whole word") || !strings.Contains(err.Error(), "Payload or error has") {
			t.Errorf("count of %q: %v; want ErrInvalid saying to type whole words", text, err)
		}
		if _, err := b.ReplayMatching(s.ctx, broker.DLQQuery{Queue: "q", ErrorContains: text}, "op"); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("replay of %q: %v; want ErrInvalid", text, err)
		}
		q := broker.DLQQuery{Queue: "q", ErrorContains: text}
		if _, err := b.Preview(s.ctx, broker.JobRequest{Kind: broker.JobDelete, Query: &q}); !errors.Is(err, broker.ErrInvalid) {
			t.Errorf("preview of %q: %v; want ErrInvalid", text, err)
		}
		if rows, err := export(text); !errors.Is(err, broker.ErrInvalid) || rows != 0 {
			t.Errorf("export of %q: %d rows, %v; want ErrInvalid", text, rows, err)
		}
	}
	if got := rec.take(); len(got) > 0 {
		t.Errorf("refused texts read: %v", got)
	}
	if left := s.dead("q", ""); len(left) != 30 {
		t.Fatalf("%d dead letters left after refusals, want 30", len(left))
	}
	// The same text over the 8 newest (a time range): checked on each.
	since := s.clock.Now().Add(-7 * time.Second)
	n, err := b.CountMatching(s.ctx, broker.DLQQuery{Queue: "q", ErrorContains: "imeou", From: since})
	if err != nil || n.Count != 8 {
		t.Errorf("count of imeou in the newest 8: %+v, %v", n, err)
	}
	rec.take()

	// The actions by words: exactly what the index and the text say.
	res, err := b.DeleteMatching(s.ctx, broker.DLQQuery{Queue: "q", ErrorContains: "the needle: found,"}, "op")
	if err != nil || res.Done != 1 {
		t.Fatalf("delete of the needle: %+v, %v", res, err)
	}
	res, err = b.ReplayMatching(s.ctx, broker.DLQQuery{Queue: "q", ErrorContains: " timeout (504) "}, "op")
	if err != nil || res.Done != 29 {
		t.Fatalf("replay of the timeouts: %+v, %v", res, err)
	}
	if got := rec.take(); len(got) > 0 {
		t.Errorf("actions by words read without the index: %v", got)
	}
	if left := s.dead("q", ""); len(left) != 0 {
		t.Errorf("%d dead letters left, want none", len(left))
	}
}
