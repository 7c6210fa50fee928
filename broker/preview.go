package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// PreviewSampleSize is how many dead letters a bulk action's confirmation
// shows.
const PreviewSampleSize = 5

// PreviewGroupCap is as far as a consumer group's dead letters are counted
// for a confirmation when the kept counts cannot answer for the filter (a
// search, a time range, a bound given): the count then says "at least".
const PreviewGroupCap = 10000

// Preview is what a bulk action's confirmation shows: how many it
// touches, in its unit and in dead letters and messages, the bound that
// freezes that set (by filter), how many dead letters of each consumer
// group, and the first few of them.
type Preview struct {
	// Count is in the action's unit: messages for a replay to every
	// group (a message counts once, whatever its dead letters), dead
	// letters for a replay to their own groups and for a delete.
	Count       int64
	DeadLetters int64
	Messages    int64
	// Bound, by filter: the set counted, to start the job with
	// (JobRequest.Query.Bound), so that it acts on exactly that.
	Bound *Bound
	// Groups: dead letters per consumer group, by name; only groups
	// with some.
	Groups []PreviewGroup
	// Sample: up to PreviewSampleSize of the dead letters, newest first
	// (by failure for a filter, by filing for ids).
	Sample []PreviewItem
}

// PreviewGroup is how many of a bulk action's dead letters are a consumer
// group's. Capped: at least DeadLetters (counted up to PreviewGroupCap).
type PreviewGroup struct {
	GroupID     int64
	Group       string
	DeadLetters int64
	Capped      bool
}

// PreviewItem is one dead letter of a confirmation's sample.
type PreviewItem struct {
	DeadLetterID  int64
	MessageID     string
	TransactionID string
	Queue         string
	Group         string
	Error         string // the first line of its error text, cut to 200 bytes
	FailedAt      time.Time
}

// Preview counts what the bulk action r would act on, in one read
// snapshot, without changing anything, after the checks StartJob makes:
// by filter as CountMatching counts (with r.Query.Bound, what is at or
// below it; without, the bound it takes now, in Preview.Bound), by ids the
// dead letters of the messages named that are still there (only
// r.Group's for a delete). Per-group counts come from the kept counts when the filter
// is a queue, a group or an error group; else they are counted up to
// PreviewGroupCap. r.Actor and r.Rate are not looked at.
func (b *Broker) Preview(ctx context.Context, r JobRequest) (Preview, error) {
	var p Preview
	if err := r.validate(); err != nil {
		return p, err
	}
	var err error
	if r.Query != nil {
		q := *r.Query
		err = b.store.View(ctx, func(tx Tx) error {
			p = Preview{}
			return b.previewMatching(ctx, tx, q, &p)
		})
	} else {
		err = b.store.View(ctx, func(tx Tx) error {
			p = Preview{}
			return previewIDs(ctx, tx, r.IDs, r.Group, &p)
		})
	}
	if err != nil {
		return Preview{}, fmt.Errorf("preview: %w", err)
	}
	p.Count = p.DeadLetters
	if (Job{Kind: r.Kind, Scope: JobScope{Mode: r.Mode}}).byMessages() {
		p.Count = p.Messages
	}
	return p, nil
}

// previewTx is what a preview reads: its groups' (previewGroupsTx) and
// the filter's partition and subscription.
type previewTx interface {
	previewGroupsTx
	PartitionTx
	SubscriptionTx
}

// previewMatching fills p for a filter, as CountMatching counts it.
func (b *Broker) previewMatching(ctx context.Context, tx previewTx, q DLQQuery, p *Preview) error {
	f, bound, ok, err := b.frozen(ctx, tx, q)
	if err != nil {
		return err
	}
	p.Bound = &bound
	if !ok {
		return nil
	}
	if p.DeadLetters, p.Messages, err = countDeadLettersAndMessages(ctx, tx, f); err != nil || p.DeadLetters == 0 {
		return err
	}
	if p.Groups, err = previewGroups(ctx, tx, f, p.DeadLetters); err != nil {
		return err
	}
	dls, err := tx.ListDeadLetters(ctx, f, Page{Limit: PreviewSampleSize})
	if err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	for _, d := range dls {
		p.Sample = append(p.Sample, previewItem(d))
	}
	return nil
}

// previewGroupsTx is what a preview's groups read.
type previewGroupsTx interface {
	DeadLetterTx
	GroupTx
	QueueTx
	StatsTx
}

// previewGroups counts f's dead letters (total of them) per consumer
// group holding dead letters in f's queue (every queue's: 0).
func previewGroups(ctx context.Context, tx previewGroupsTx, f Filter, total int64) ([]PreviewGroup, error) {
	var stats []GroupStats
	if f.QueueID != 0 {
		gs, err := tx.Stats(ctx, f.QueueID)
		if err != nil {
			return nil, fmt.Errorf("groups: %w", err)
		}
		stats = gs
	} else {
		qs, err := tx.Queues(ctx)
		if err != nil {
			return nil, fmt.Errorf("queues: %w", err)
		}
		for _, qu := range qs {
			gs, err := tx.Stats(ctx, qu.ID)
			if err != nil {
				return nil, fmt.Errorf("groups: %w", err)
			}
			stats = append(stats, gs...)
		}
	}
	// The groups holding dead letters, once each (a group reads several
	// queues), by name.
	var holding []PreviewGroup
	for _, g := range stats {
		if g.Depth > 0 && (f.GroupID == 0 || g.GroupID == f.GroupID) && !slices.ContainsFunc(holding, func(h PreviewGroup) bool { return h.GroupID == g.GroupID }) {
			holding = append(holding, PreviewGroup{GroupID: g.GroupID, Group: g.Group})
		}
	}
	slices.SortFunc(holding, func(a, b PreviewGroup) int { return cmp.Compare(a.Group, b.Group) })
	if len(holding) == 1 {
		holding[0].DeadLetters = total
		return holding, nil
	}
	out := holding[:0]
	for _, g := range holding {
		gf := f
		gf.GroupID = g.GroupID
		var err error
		if g.DeadLetters, g.Capped, err = groupDeadLetters(ctx, tx, gf); err != nil {
			return nil, fmt.Errorf("dead letters of group %s: %w", g.Group, err)
		}
		if g.DeadLetters > 0 {
			out = append(out, g)
		}
	}
	return out, nil
}

// groupDeadLetters counts what f (of one group) selects: from the kept
// counts where countDeadLetters has them (a queue's group, an error group
// of it), else up to PreviewGroupCap.
func groupDeadLetters(ctx context.Context, tx deadLetterGroupStatsTx, f Filter) (n int64, capped bool, err error) {
	if n, ok, err := groupCount(ctx, tx, f); err != nil || ok {
		return n, false, err
	}
	if f.simple() {
		n, err := countDeadLetters(ctx, tx, f)
		return n, false, err
	}
	if n, err = tx.CountDeadLettersUpTo(ctx, f, PreviewGroupCap+1); err != nil {
		return 0, false, err
	}
	return min(n, PreviewGroupCap), n > PreviewGroupCap, nil
}

// previewIDs fills p for the messages named by ids: their dead letters
// (only group's when set) as a bulk action by ids finds them.
func previewIDs(ctx context.Context, tx deadLetterSubscriptionTx, ids []string, group string, p *Preview) error {
	keys, _, err := keysOfIDs(ctx, tx, ids, group)
	if err != nil || len(keys) == 0 {
		return err
	}
	p.DeadLetters, p.Messages = int64(len(keys)), int64(messagesIn(keys))
	perGroup := map[int64]int64{}
	for _, k := range keys {
		perGroup[k.GroupID]++
	}
	for gid, n := range perGroup {
		name, err := tx.GroupName(ctx, gid)
		if err != nil {
			return fmt.Errorf("group name: %w", err)
		}
		p.Groups = append(p.Groups, PreviewGroup{GroupID: gid, Group: name, DeadLetters: n})
	}
	slices.SortFunc(p.Groups, func(a, b PreviewGroup) int { return cmp.Compare(a.Group, b.Group) })
	// The newest filed first: the highest row ids.
	slices.SortFunc(keys, func(a, b DeadLetterKey) int { return cmp.Compare(b.ID, a.ID) })
	for _, k := range keys[:min(len(keys), PreviewSampleSize)] {
		d, err := tx.DeadLetter(ctx, k.ID)
		if err != nil {
			return fmt.Errorf("sample: %w", err)
		}
		p.Sample = append(p.Sample, previewItem(d))
	}
	return nil
}

func previewItem(d DeadLetter) PreviewItem {
	line, _, _ := strings.Cut(d.Error, "\n")
	line = strings.TrimSuffix(line, "\r")
	return PreviewItem{DeadLetterID: d.ID, MessageID: d.MessageID(), TransactionID: d.TransactionID, Queue: d.Queue, Group: d.Group, Error: truncate(line, 200), FailedAt: d.FailedAt}
}
