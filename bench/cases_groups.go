package main

import (
	"context"
	"fmt"
	"time"
)

// S2: the error groups of a queue from their kept counts, at the
// dashboard database's size: what the dead-letter list's panel reads
// (the 10 biggest groups of the big consumer group, and of the whole
// queue, each with its 24 h trend) and what the overview reads (the 3
// biggest of every queue), p99.

func caseS2(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqDB(ctx)
	if err != nil {
		return nil, err
	}
	b := f.ours.b
	// The fixture's groups must hold its dead letters: else it was made
	// before the generator filled them (delete the cache).
	all, err := b.ErrorGroups(ctx, dlqQueue, dlqGroup0, "", 100)
	if err != nil {
		return nil, err
	}
	var held int64
	for _, g := range all {
		held += g.DeadLetters
	}
	if held != int64(f.inGroup()) {
		return nil, fmt.Errorf("S2: the error groups of %s hold %d dead letters, the group %d: a cached database from before the generator filled them? delete bench/.cache", dlqGroup0, held, f.inGroup())
	}
	k, budget := e.size(2000, 200), e.dur(2*time.Second, 300*time.Millisecond)
	type read struct {
		name string
		fn   func() error
	}
	reads := []read{
		{"10 groups of a consumer group, with trends", func() error {
			gs, err := b.ErrorGroups(ctx, dlqQueue, dlqGroup0, "", 10)
			if err == nil && len(gs) == 0 {
				err = fmt.Errorf("no error groups")
			}
			return err
		}},
		{"10 groups of the queue (summed over its groups), with trends", func() error {
			_, err := b.ErrorGroups(ctx, dlqQueue, "", "", 10)
			return err
		}},
		{"3 groups of every queue (overview)", func() error {
			_, err := b.TopErrorGroups(ctx, 3)
			return err
		}},
	}
	p50s := map[string][]float64{}
	var vs []variant
	for _, r := range reads {
		vs = append(vs, variant{r.name, func(ctx context.Context, _ int) (float64, error) {
			lat, err := timeCalls(ctx, k, budget, r.fn)
			p50s[r.name] = append(p50s[r.name], percentile(lat, 0.5))
			return percentile(lat, 0.99), err
		}})
	}
	smp, err := interleave(ctx, e, e.reps, vs...)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for i, r := range reads {
		row := single(smp, "S2", "error groups, p99: "+r.name, "ms", r.name)
		if i > 0 {
			row.Measure = "  " + row.Measure
		}
		row.Must, row.Goal = atMost("ours", 5, "≤ 5 ms"), atMost("ours", 1, "≤ 1 ms")
		row.Note = fmt.Sprintf("p50 %.3f ms; %d groups in %s; %s", median(p50s[r.name]), len(all), dlqGroup0, f.describe())
		rows = append(rows, row)
	}
	return rows, nil
}
