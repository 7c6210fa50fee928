package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// mergeLog is a store that logs, in order, the chunks of jobs (a write
// that saves a job: "chunk <pace>"), the looks at whether the text index
// has merging due (a View: "look") and its merge steps ("merge", with
// what the step reported). It answers in their place: a look finds
// merging due, and a step (run on the store all the same) says more is
// due for the first `due` steps only. Each end of a run of steps (a step
// reporting none due) is sent on tidied.
type mergeLog struct {
	broker.Store
	mu     sync.Mutex
	events []string
	due    int
	pages  []int
	tidied chan struct{}
}

type mergeLogTx struct {
	broker.Tx
	l              *mergeLog
	chunk          string
	more, mergeRan bool
	looked         bool
}

func (l *mergeLog) Update(ctx context.Context, o broker.UpdateOptions, fn func(broker.Tx) error) error {
	var tx *mergeLogTx
	err := l.Store.Update(ctx, o, func(inner broker.Tx) error {
		tx = &mergeLogTx{Tx: inner, l: l} // anew at each run of fn
		return fn(tx)
	})
	if err != nil || tx == nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if tx.chunk != "" {
		l.events = append(l.events, tx.chunk)
	}
	if tx.mergeRan {
		l.events = append(l.events, fmt.Sprintf("merge %t", tx.more))
		if tx.more {
			l.due--
		} else {
			l.tidied <- struct{}{}
		}
	}
	return nil
}

func (l *mergeLog) View(ctx context.Context, fn func(broker.Tx) error) error {
	var tx *mergeLogTx
	err := l.Store.View(ctx, func(inner broker.Tx) error {
		tx = &mergeLogTx{Tx: inner, l: l}
		return fn(tx)
	})
	if err != nil || tx == nil || !tx.looked {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, "look")
	return nil
}

func (tx *mergeLogTx) SaveJob(ctx context.Context, j *broker.Job) error {
	pace := j.Scope.Pace
	if pace == "" {
		pace = "gentle"
	}
	tx.chunk = "chunk " + pace
	return tx.Tx.SaveJob(ctx, j)
}

func (tx *mergeLogTx) MergeTextIndex(ctx context.Context, pages int) (bool, error) {
	if _, err := tx.Tx.MergeTextIndex(ctx, pages); err != nil {
		return false, err
	}
	if pages == 0 {
		tx.looked = true
		return true, nil
	}
	tx.l.mu.Lock()
	tx.l.pages = append(tx.l.pages, pages)
	more := tx.l.due > 0
	tx.l.mu.Unlock()
	tx.more, tx.mergeRan = more, true
	return more, nil
}

// The job runner merges the text index's segments after each chunk of a
// job at the default pace, and after its last, in bounded steps
// (broker.TextMergePages), each a write of its own, until the store says
// none is due; never after a chunk of a job run flat out (its chunks are
// bounded by rows: the merges its commits bring on are paid once for
// many rows).
func testJobMergesTheTextIndexBetweenItsChunks(t *testing.T, harness Harness) {
	t.Parallel()
	s := setup(t, harness)
	s.fill("q", "g", []string{"p"}, 300)
	s.fill("r", "g", []string{"p"}, 600) // more than two chunks of 250
	l := &mergeLog{Store: s.db, due: 2, tidied: make(chan struct{}, 100)}
	b := broker.New(broker.Config{Store: l, Clock: s.clock})
	t.Cleanup(b.Close)
	ctx, stop := context.WithTimeout(s.ctx, time.Minute)
	defer stop()
	go b.RunJobs(ctx)

	full, err := b.StartJob(ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q"}, Pace: broker.PaceFull, Actor: "user:dev"})
	if err != nil {
		t.Fatal(err)
	}
	if full, err = b.WaitJob(ctx, full.ID); err != nil || full.State != broker.JobDone || full.Done != 300 {
		t.Fatalf("flat out: %+v %v", full, err)
	}
	gentle, err := b.StartJob(ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "r"}, Actor: "user:dev"})
	if err != nil {
		t.Fatal(err)
	}
	if gentle, err = b.WaitJob(ctx, gentle.ID); err != nil || gentle.State != broker.JobDone || gentle.Done != 600 {
		t.Fatalf("gentle: %+v %v", gentle, err)
	}
	// Each gentle chunk's run of steps ends with one reporting none due,
	// the last chunk's too: as many as the gentle chunks.
	l.mu.Lock()
	chunks := strings.Count(strings.Join(l.events, ","), "chunk gentle")
	l.mu.Unlock()
	for range chunks {
		select {
		case <-l.tidied:
		case <-ctx.Done():
			t.Fatalf("the merge steps after the gentle chunks did not end: %v", ctx.Err())
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Flat out (the first job's chunks, before the other was started):
	// no look, no step. Then each gentle chunk is followed by a look and,
	// merging being due, steps until one reports none due (the first run
	// by three: the store said more was due twice), the last chunk too.
	want := []string{"chunk full", "chunk full"}
	for i := range chunks {
		want = append(want, "chunk gentle", "look")
		if i == 0 {
			want = append(want, "merge true", "merge true")
		}
		want = append(want, "merge false")
	}
	if got := strings.Join(l.events, ", "); got != strings.Join(want, ", ") || chunks < 3 {
		t.Fatalf("chunks and merge steps:\n%s\nwant\n%s", got, strings.Join(want, ", "))
	}
	for _, p := range l.pages {
		if p != broker.TextMergePages {
			t.Fatalf("a step of %d pages, want %d", p, broker.TextMergePages)
		}
	}
}
