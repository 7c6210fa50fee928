package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lazarus-dlq/lazarus/broker"
)

// S1: search in dead letters (issue 14) at the dashboard database's size:
// payload field filters, free text in payloads and in error texts, each
// a page of 50 of queue orders with its total (GET /api/v1/dlq's work),
// p99 over many different values, and the process's CPU time a page
// beside it (the load-independent figure: the calls run one at a time).

func caseS1(ctx context.Context, e *env) ([]Row, error) {
	f, err := e.dlqDB(ctx)
	if err != nil {
		return nil, err
	}
	b := f.ours.b
	total := f.inGroup() + f.others()
	r := rand.New(rand.NewPCG(3, 4))
	type search struct {
		name, note string
		query      func() broker.DLQQuery
		found      func(p broker.DLQPage) error
	}
	anyFound := func(p broker.DLQPage) error {
		if len(p.Items) == 0 && p.Next == nil {
			return fmt.Errorf("nothing found")
		}
		return nil
	}
	full := func(p broker.DLQPage) error {
		if len(p.Items) != 50 {
			return fmt.Errorf("%d found, want a full page of 50", len(p.Items))
		}
		return nil
	}
	one := func(p broker.DLQPage) error {
		if len(p.Items) != 1 {
			return fmt.Errorf("%d found, want 1", len(p.Items))
		}
		return nil
	}
	// Message seqs are 1…total; each is one dead letter of one queue, so
	// an orderId of queue orders is found only there.
	orderOf := func() (string, broker.DLQQuery) {
		for {
			seq := r.IntN(total) + 1
			q := broker.DLQQuery{Limit: 1, Text: fmt.Sprintf("o-%d", seq)}
			p, err := b.DeadLetters(ctx, q)
			if err == nil && len(p.Items) == 1 && p.Items[0].Queue == dlqQueue {
				return fmt.Sprintf("o-%d", seq), broker.DLQQuery{Queue: dlqQueue}
			}
		}
	}
	searches := []search{
		{"field orderId = o-N", "rare string value: the index, then json_extract", func() broker.DLQQuery {
			id, q := orderOf()
			q.Fields = []string{"orderId = " + id}
			return q
		}, one},
		{"fields card.brand != x, orderId = o-N", "two field filters, one with no word", func() broker.DLQQuery {
			id, q := orderOf()
			q.Fields = []string{"card.brand != nobrand", "orderId = " + id}
			return q
		}, anyFound},
		{"field card.brand = amex", "common value (1 in 8): the newest 10,000 index matches", func() broker.DLQQuery {
			return broker.DLQQuery{Queue: dlqQueue, Group: dlqGroup0, Fields: []string{"card.brand = amex"}}
		}, anyFound},
		{"field amount > N", "range: a window of the newest 20,000", func() broker.DLQQuery {
			return broker.DLQQuery{Queue: dlqQueue, Fields: []string{fmt.Sprintf("amount > %d", 850+r.IntN(60))}}
		}, anyFound},
		{"field customer = c-N", "about 25 matches", func() broker.DLQQuery {
			return broker.DLQQuery{Queue: dlqQueue, Fields: []string{fmt.Sprintf("customer = c-%05d", r.IntN(50_000))}}
		}, func(broker.DLQPage) error { return nil }},
		{"text payload o-N", "free text, a rare payload word", func() broker.DLQQuery {
			id, q := orderOf()
			q.Text = id
			return q
		}, one},
		{"text error \"order N already\"", "free text, a phrase of the error text", func() broker.DLQQuery {
			return broker.DLQQuery{Queue: dlqQueue, Text: fmt.Sprintf(`"order %d already"`, r.IntN(1_000_000))}
		}, func(broker.DLQPage) error { return nil }},
		{"text error timeouterror", "free text, a word of 30 % of errors (capped)", func() broker.DLQQuery {
			return broker.DLQQuery{Queue: dlqQueue, Text: "TimeoutError"}
		}, anyFound},
		// Issue 37: a word every payload holds cost 246 ms of CPU a page
		// (the index's whole list of it read in each statement).
		{"text payload eur", "free text, a word of every payload (capped: a window)", func() broker.DLQQuery {
			return broker.DLQQuery{Queue: dlqQueue, Text: "EUR"}
		}, full},
		{"text payload eur, every queue", "the same across every queue (the search box)", func() broker.DLQQuery {
			return broker.DLQQuery{Text: "EUR"}
		}, full},
	}
	p50s, cpus := Samples{}, Samples{}
	var vs []variant
	for _, s := range searches {
		vs = append(vs, variant{s.name, func(ctx context.Context, _ int) (float64, error) {
			qs := make([]broker.DLQQuery, e.size(200, 30))
			for i := range qs {
				qs[i] = s.query()
				qs[i].Limit, qs[i].WithTotal = 50, true
			}
			i := 0
			cpu0 := cpuTime()
			lat, err := timeCalls(ctx, len(qs), e.dur(5*time.Second, time.Second), func() error {
				p, err := b.DeadLetters(ctx, qs[i%len(qs)])
				i++
				if err == nil {
					err = s.found(p)
				}
				return err
			})
			if len(lat) > 0 {
				cpus[s.name] = append(cpus[s.name], float64(cpuTime()-cpu0)/1e6/float64(len(lat)))
			}
			p50s[s.name] = append(p50s[s.name], percentile(lat, 0.5))
			return percentile(lat, 0.99), err
		}})
	}
	smp, err := interleave(ctx, e, e.reps, vs...)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, s := range searches {
		row := single(smp, "S1", "search, page of 50 with total, p99: "+s.name, "ms", s.name)
		row.Must, row.Goal = atMost("ours", 50, "≤ 50 ms"), atMost("ours", 10, "≤ 10 ms")
		row.Note = fmt.Sprintf("%s; p50 %.2f ms; CPU a page %.2f ms (the process's, load-independent); %s", s.note, median(p50s[s.name]), median(cpus[s.name]), f.describe())
		rows = append(rows, row)
	}
	return rows, nil
}
