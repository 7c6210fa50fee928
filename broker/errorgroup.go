package broker

import (
	"context"
	"fmt"
	"time"
)

// ErrorGroupHourRetention is how long the hourly counts behind the error
// groups' trends and funnels are kept (maintenance sweeps older ones): a
// day more than the funnel's longest window (7 days), so that the
// window is whole whenever the sweep last ran.
const ErrorGroupHourRetention = 8 * 24 * time.Hour

// TrendHours is how many hours an error group's trend spans, up to now.
const TrendHours = 24

// MaxErrorGroups is the most error groups one call returns.
const MaxErrorGroups = 100

// ErrorGroup is the dead letters of a queue (and consumer group) whose
// errors have the same fingerprint, from kept counts.
type ErrorGroup struct {
	QueueID     int64
	GroupID     int64 // 0: summed over the queue's consumer groups
	Fingerprint string
	DeadLetters int64
	// FirstFailedAt and LastFailedAt are when the first and the newest
	// dead letter of the group were filed since it last held none;
	// replays and deletes of some of them do not move them.
	FirstFailedAt, LastFailedAt time.Time
	// SampleError is the newest error text filed into the group, whole
	// (as kept: at most MaxErrorText); it may be of a dead letter since
	// replayed or deleted.
	SampleError string
	// Trend is how many dead letters were filed into the group in each of
	// the TrendHours hours up to now, oldest first (the last is the hour
	// now is in). Only the broker's ErrorGroups and Triage fill it.
	Trend []int64
}

// ErrorGroupHour is how many dead letters were filed into an error group
// in one hour (unix seconds / 3600).
type ErrorGroupHour struct {
	Fingerprint string
	Hour        int64
	Filed       int64
}

// GroupTx is what error groups need from storage. The store keeps the
// groups' counts in the transaction of every filing, replay and delete:
// a filing's with the dead letter (Tx.InsertDeadLetter), the others by
// the broker's calls of these methods there.
type GroupTx interface {
	// RemoveFromErrorGroup takes n dead letters (replayed or deleted) out
	// of the group's count, and forgets the group when none is left. The
	// hourly counts of filings are left as they are. A group not kept
	// is not an error (nothing happens). It writes error_groups by its
	// key (an update, then a delete when the count is 0 or below).
	RemoveFromErrorGroup(ctx context.Context, queueID, groupID int64, fingerprint string, n int64) error
	// ErrorGroups returns up to limit error groups of a queue, biggest
	// first (then by fingerprint), with their samples and without trends:
	// of the consumer group groupID, or (0) summed over the queue's
	// groups; only the group fingerprint when it is not "". It reads
	// error_groups (and, across groups, group_stats for the groups' ids):
	// index reads of at most limit rows per consumer group. Summed over
	// groups, the biggest are taken among each group's limit biggest: a
	// fingerprint that leads in no group can be missed; a group's own list
	// is exact. None: an empty list.
	ErrorGroups(ctx context.Context, queueID, groupID int64, fingerprint string, limit int) ([]ErrorGroup, error)
	// ErrorGroupHours returns the dead letters filed per hour, from the
	// hour fromHour on, into the named error groups of a queue (of groupID,
	// or summed over the queue's groups when 0), in no particular order;
	// hours with none are left out. It reads error_group_hours by its key.
	ErrorGroupHours(ctx context.Context, queueID, groupID int64, fingerprints []string, fromHour int64) ([]ErrorGroupHour, error)
	// ErrorGroupVersions returns the consumer versions that filed dead
	// letters into an error group (the acks that said one), the one
	// last seen first: kept as each is filed, in its transaction.
	ErrorGroupVersions(ctx context.Context, queueID, groupID int64, fingerprint string) ([]ErrorGroupVersion, error)
}

// hourOf is the hour (unix seconds / 3600) t is in.
func hourOf(t time.Time) int64 { return t.Unix() / 3600 }

// ErrorGroups returns up to limit error groups of the dead letters of a
// queue (and consumer group, and only the group fingerprint, when given),
// biggest first, each with its trend of the last TrendHours hours. An
// unknown queue is ErrNotFound; an unknown consumer group has none.
func (b *Broker) ErrorGroups(ctx context.Context, queue, group, fingerprint string, limit int) ([]ErrorGroup, error) {
	if limit < 1 || limit > MaxErrorGroups {
		return nil, errorf(ErrInvalid, "limit must be between 1 and %d", MaxErrorGroups)
	}
	var out []ErrorGroup
	err := b.store.View(ctx, func(tx Tx) error {
		q, err := queueNamed(ctx, tx, queue)
		if err != nil {
			return err
		}
		var gid int64
		if group != "" {
			if gid, err = tx.GroupID(ctx, group, false); isNotFound(err) {
				return nil
			} else if err != nil {
				return err
			}
		}
		out, err = errorGroups(ctx, tx, q.ID, gid, fingerprint, limit, b.now())
		return err
	})
	return out, err
}

// TopErrorGroups returns, per queue name, up to limit of the queue's
// biggest error groups summed over its consumer groups, without trends
// (the overview and /metrics).
func (b *Broker) TopErrorGroups(ctx context.Context, limit int) (map[string][]ErrorGroup, error) {
	if limit < 1 || limit > MaxErrorGroups {
		return nil, errorf(ErrInvalid, "limit must be between 1 and %d", MaxErrorGroups)
	}
	out := map[string][]ErrorGroup{}
	err := b.store.View(ctx, func(tx Tx) error {
		qs, err := tx.Queues(ctx)
		if err != nil {
			return err
		}
		if len(qs) == 0 {
			return nil
		}
		// Every queue's at once (TopErrorGroupsOf, one statement), not a
		// statement a queue: /metrics reads them at every scrape.
		ids := make([]int64, len(qs))
		names := make(map[int64]string, len(qs))
		for i, q := range qs {
			ids[i], names[q.ID] = q.ID, q.Name
		}
		gs, err := tx.TopErrorGroupsOf(ctx, ids, limit)
		if err != nil {
			return fmt.Errorf("error groups: %w", err)
		}
		for _, g := range gs {
			out[names[g.QueueID]] = append(out[names[g.QueueID]], g)
		}
		return nil
	})
	return out, err
}

// errorGroups reads the error groups and fills in their trends up to now.
func errorGroups(ctx context.Context, tx GroupTx, queueID, groupID int64, fingerprint string, limit int, now time.Time) ([]ErrorGroup, error) {
	gs, err := tx.ErrorGroups(ctx, queueID, groupID, fingerprint, limit)
	if err != nil || len(gs) == 0 {
		return gs, err
	}
	fps := make([]string, len(gs))
	at := make(map[string]int, len(gs))
	for i := range gs {
		fps[i], at[gs[i].Fingerprint] = gs[i].Fingerprint, i
		gs[i].Trend = make([]int64, TrendHours)
	}
	last := hourOf(now)
	hours, err := tx.ErrorGroupHours(ctx, queueID, groupID, fps, last-TrendHours+1)
	if err != nil {
		return nil, fmt.Errorf("error group trends: %w", err)
	}
	for _, h := range hours {
		if i, ok := at[h.Fingerprint]; ok && h.Hour <= last && h.Hour > last-TrendHours {
			gs[i].Trend[TrendHours-1-int(last-h.Hour)] += h.Filed
		}
	}
	return gs, nil
}

// groupCount answers a count of f from the kept counts of the error
// groups when f is a queue's (and consumer group's) error group and
// nothing more; ok is false otherwise.
func groupCount(ctx context.Context, tx GroupTx, f Filter) (n int64, ok bool, err error) {
	fp := f.Fingerprint
	f.Fingerprint = ""
	if fp == "" || !f.simple() {
		return 0, false, nil
	}
	gs, err := tx.ErrorGroups(ctx, f.QueueID, f.GroupID, fp, 1)
	if err != nil || len(gs) == 0 {
		return 0, err == nil, err
	}
	return gs[0].DeadLetters, true, nil
}
