package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// River v0.51.2 on SQLite (riverdriver/riversqlite), in process, on a
// reference database (the same settings as ours, one connection as
// riversqlite advises): each message is a job inserted on its own
// (Client.Insert), worked by a worker that does nothing, and completed by
// River's completer. River polls SQLite for work (no LISTEN), here every
// millisecond, its minimum.

// riverArgs is the job: the message's body.
type riverArgs struct {
	Body []byte `json:"body"`
}

// Kind names River's job kind.
func (riverArgs) Kind() string { return "bench" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
}

// Work is the consumer's work: nothing, as for the other subjects.
func (riverWorker) Work(context.Context, *river.Job[riverArgs]) error { return nil }

// riverLifecycle inserts n jobs one at a time while a River client works
// them, until all n are completed.
func riverLifecycle(ctx context.Context, e *env, n int) (runStat, error) {
	path := e.path("river")
	defer removeDB(path)
	d, err := e.openRef(ctx, path, e.sync)
	if err != nil {
		return runStat{}, err
	}
	defer d.Close()
	drv := riversqlite.New(d)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := rivermigrate.New(drv, &rivermigrate.Config{Logger: quiet})
	if err != nil {
		return runStat{}, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return runStat{}, fmt.Errorf("river migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{})
	c, err := river.NewClient[*sql.Tx](drv, &river.Config{
		Logger:            quiet,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
		Workers:           workers,
		FetchCooldown:     river.FetchCooldownMin,
		FetchPollInterval: river.FetchPollIntervalMin,
	})
	if err != nil {
		return runStat{}, err
	}
	done, cancel := c.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return runStat{}, err
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		c.Stop(sctx)
	}()
	body := payload(0, 0)
	sw := startStopwatch()
	errc := make(chan error, 1)
	go func() {
		for range n {
			if _, err := c.Insert(ctx, riverArgs{Body: body}, nil); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	timeout := time.After(time.Duration(n)*10*time.Millisecond + 30*time.Second)
	for got := 0; got < n; {
		select {
		case ev := <-done:
			if ev.Kind != river.EventKindJobCompleted {
				return runStat{}, fmt.Errorf("river: job %s", ev.Kind)
			}
			got++
		case err := <-errc:
			if err != nil {
				return runStat{}, fmt.Errorf("river insert: %w", err)
			}
			errc = nil
		case <-timeout:
			return runStat{}, fmt.Errorf("river: %d of %d jobs completed in time", got, n)
		case <-ctx.Done():
			return runStat{}, ctx.Err()
		}
	}
	return sw.stop(n), nil
}
