package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// CheckThresholds judges every queue (against its limits: Health), and
// each consumer group of it (its dead letters' depth and oldest age),
// and raises threshold.breached for each that is past a threshold now
// and was not at the last check, threshold.recovered for each that was
// and is no longer. The last verdict of each is kept in the store
// (NotifyTx.ThresholdStates), so each change is told once, across
// restarts and leaders; a queue that is gone takes its verdicts with
// it, untold. It returns how many events it raised. The leader runs it
// after each maintenance (Run).
func (b *Broker) CheckThresholds(ctx context.Context) (int, error) {
	health, _, err := b.Health(ctx)
	if err != nil {
		return 0, fmt.Errorf("thresholds: %w", err)
	}
	type key struct{ queue, group string }
	now := b.now()
	verdicts := map[key][]Breach{}
	for _, qh := range health {
		verdicts[key{qh.Name, ""}] = qh.Breaches
		for _, g := range qh.Stats {
			h := Health{Depth: g.Depth}
			if !g.OldestFailedAt.IsZero() && g.Depth > 0 {
				h.Oldest = now.Sub(g.OldestFailedAt)
			}
			verdicts[key{qh.Name, g.Group}] = qh.Limits.Check(h)
		}
	}
	var raised int
	err = b.update(ctx, func(tx Tx, _ func(string)) error {
		raised = 0
		states, err := tx.ThresholdStates(ctx)
		if err != nil {
			return err
		}
		was := map[key]ThresholdState{}
		for _, s := range states {
			k := key{s.Queue, s.Group}
			if _, ok := verdicts[key{s.Queue, ""}]; !ok {
				// The queue is gone (or made since Health read): its
				// verdict goes untold.
				if err := tx.DeleteThresholdState(ctx, s.Queue, s.Group); err != nil {
					return err
				}
				continue
			}
			was[k] = s
		}
		keys := make([]key, 0, len(verdicts)+len(was))
		for k := range verdicts {
			keys = append(keys, k)
		}
		for k := range was {
			if _, ok := verdicts[k]; !ok {
				keys = append(keys, k) // a group gone from its queue: recovered
			}
		}
		slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.queue, b.queue), cmp.Compare(a.group, b.group)) })
		for _, k := range keys {
			bs := verdicts[k]
			prev, breached := was[k], len(bs) > 0
			if breached == prev.Breached {
				continue
			}
			e := Event{Queue: k.queue, Group: k.group, At: now}
			if breached {
				texts := make([]string, len(bs))
				for i, br := range bs {
					texts[i] = br.Text
				}
				e.Kind, e.Detail = EventThresholdBreached, strings.Join(texts, "; ")
				err = tx.SaveThresholdState(ctx, ThresholdState{Queue: k.queue, Group: k.group, Breached: true, Detail: e.Detail, ChangedAt: now})
			} else {
				e.Kind, e.Detail = EventThresholdRecovered, "back within its thresholds (was: "+prev.Detail+")"
				err = tx.DeleteThresholdState(ctx, k.queue, k.group)
			}
			if err != nil {
				return err
			}
			if err := b.raise(ctx, tx, e); err != nil {
				return err
			}
			raised++
		}
		return nil
	})
	return raised, err
}
