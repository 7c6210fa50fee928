package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// A replay job's chunk is set-based: a chunk of 200 dead letters runs no
// more statements than one of 10 (issue 37: a million by filter), on
// the writer's connection, counted by SQLite itself (the runs of each
// statement the writer keeps prepared; FTS5's own statements on its
// tables, a few a row it deletes, are not the store's). The clock stands still, so the chunks are bounded
// by their rows (a rate limit's: a tenth of the rate a chunk).
func TestReplayChunkStatementsDoNotGrowWithItsRows(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	d, b := openBrokerAt(t, &at)
	const n = 500
	items := make([]broker.PushItem, n)
	for i := range items {
		items[i] = broker.PushItem{Queue: "q", Partition: "p", TransactionID: fmt.Sprintf("m-%d", i), Payload: []byte(`{"n":1}`)}
	}
	if _, err := b.Push(ctx, items); err != nil {
		t.Fatal(err)
	}
	res, err := b.Pop(ctx, broker.PopRequest{Queue: "q", Group: "g", Batch: n})
	if err != nil || len(res.Messages) != n {
		t.Fatalf("pop: %d messages, %v", len(res.Messages), err)
	}
	acks := make([]broker.Ack, n)
	for i, m := range res.Messages {
		acks[i] = broker.Ack{TransactionID: m.TransactionID, PartitionID: m.PartitionUUID, LeaseID: res.LeaseID, Status: broker.AckDLQ, Error: "boom"}
	}
	if _, err := b.AckBatch(ctx, "g", acks); err != nil {
		t.Fatal(err)
	}
	// The trimming of the text index's logs runs in whichever commit
	// comes 100 ms after the last (search.go): none here, so that the
	// counts are the chunks' own. No write runs: the writer's field is
	// free.
	d.search.trimmedAt = time.Now().Add(time.Hour)
	// step runs one chunk of job and returns the statements the writer
	// ran for it and the dead letters it replayed.
	step := func(job *broker.Job) (stmts, done int64) {
		t.Helper()
		before, was := d.bg.raw.statementsRun(), job.Done
		j, err := b.StepJob(ctx, job.ID)
		if err != nil || j.State != broker.JobRunning {
			t.Fatalf("step of job %d: %+v %v", job.ID, j, err)
		}
		*job = j
		return d.bg.raw.statementsRun() - before, j.Done - was
	}
	start := func(rate int) broker.Job {
		t.Helper()
		j, err := b.StartJob(ctx, broker.JobRequest{Kind: broker.JobReplay, Query: &broker.DLQQuery{Queue: "q"}, Rate: rate, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	small := start(100) // chunks of 10
	step(&small)        // the first: what a first chunk reads once (names, the queue's options)
	smallStmts, smallDone := step(&small)
	if _, err := b.CancelJob(ctx, small.ID, "test"); err != nil {
		t.Fatal(err)
	}
	big := start(2000) // chunks of 200
	step(&big)

	bigStmts, bigDone := step(&big)
	if smallDone != 10 || bigDone != 200 {
		t.Fatalf("chunks of %d and %d dead letters, want 10 and 200", smallDone, bigDone)
	}
	if smallStmts <= 0 || bigStmts > smallStmts {
		t.Errorf("a chunk of 200 ran %d statements, one of 10 ran %d: want no more", bigStmts, smallStmts)
	}
	t.Logf("statements a chunk: %d (10 dead letters), %d (200)", smallStmts, bigStmts)
}
