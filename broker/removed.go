package broker

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// RestoreWindow is how long a deleted dead letter can be restored, by
// default (Config.RestoreWindow); after it, it is gone for good (the
// maintenance sweep, SweepHistory, cuts it to what its page needs to say
// what happened).
const RestoreWindow = 24 * time.Hour

// HistoryRetention is how long the history of replays and deletes (jobs,
// their outcomes, the lineage of copies, edits, deleted dead letters'
// records, failed attempts of those) is kept after it was made.
const HistoryRetention = 400 * 24 * time.Hour

// RemovedDeleted is how a deleted dead letter was removed.
const RemovedDeleted = "deleted"

// RemovedDeadLetter is a dead letter that was deleted, as kept in
// removed_dead_letters: whole while it can be restored.
type RemovedDeadLetter struct {
	ID           int64 // its row in removed_dead_letters
	DeadLetter   DeadLetter
	How          string
	At           time.Time
	Actor        string
	JobID        int64
	RestoreUntil time.Time // zero: no longer restorable
	RestoredAt   time.Time
	RestoredBy   string
	// Retention is, for an expired dead letter (How RemovedExpired), the
	// deadLetterRetentionSeconds that expired it.
	Retention time.Duration
}

// RemovedTx is what deleting with a restore window needs from storage.
type RemovedTx interface {
	// Restorable returns the removed dead letters still restorable at now
	// (RestoreUntil after now, not restored) of the message seq (only the
	// group's when groupID is not 0), by removed_dead_letters_seq; or,
	// with jobID set instead (seq 0), up to limit of the job's, by
	// removed_dead_letters_job. A record whose (seq, group) has a dead
	// letter again is left out. Their DeadLetter has no ID (it gets a new
	// one when restored), no Payload and no names. None: empty. It
	// writes and locks nothing: the broker restores what it read with
	// MarkRestored and InsertDeadLetter in the same Update (one writer;
	// several writers: lock the records read, or mark them with a
	// condition that they are still restorable).
	Restorable(ctx context.Context, seq, groupID, jobID int64, now time.Time, limit int) ([]RemovedDeadLetter, error)
	// CountRestorable counts the job's dead letters still restorable at
	// now, and says until when the last of them is (zero: none), by
	// removed_dead_letters_job.
	CountRestorable(ctx context.Context, jobID int64, now time.Time) (n int64, until time.Time, err error)
	// MarkRestored records that the removed rows ids were restored, at
	// now by actor: no longer restorable, their error text gone (the
	// dead letter has it again). It writes removed_dead_letters by the
	// primary key, whether or not a row was restorable still; ids not
	// there: nothing, no error.
	MarkRestored(ctx context.Context, ids []int64, now time.Time, actor string) error
	// EndRestoreWindows cuts up to limit removed dead letters whose
	// window ended before now to what their page needs (their error
	// text goes, RestoreUntil zero) and returns how many, oldest window
	// first (by removed_dead_letters_window; writes removed_dead_letters
	// only).
	EndRestoreWindows(ctx context.Context, now time.Time, limit int) (int64, error)
	// SweepHistory deletes up to limit rows of history made before
	// before: finished jobs with their outcomes, replays (walked from the
	// copy afterCopy on) with their edits and outcomes, removed dead
	// letters' records, and the failed attempts of the messages of those;
	// it keeps the replay of a copy for one group that another group has
	// not passed yet. It returns how many rows of jobs, replays and
	// removed dead letters went, and the copy the walk of replays goes on
	// after (0: it is done); nothing left is (0, 0).
	SweepHistory(ctx context.Context, before time.Time, limit int, afterCopy int64) (swept, nextCopy int64, err error)
}

// RestoreWindow is how long this broker keeps a deleted dead letter
// restorable.
func (b *Broker) RestoreWindow() time.Duration { return b.restoreWindow }

// Restore puts back the deleted dead letters of a message (only group's
// when set) that are still within their restore window: each as it was,
// with a new row id (so that no bulk action's bound counted before takes
// it in), counted back into its depth and error group. It returns how
// many it restored; ErrNotFound when none could be, ErrConflict when the
// only ones were skipped (RestoreMessage says which and why).
func (b *Broker) Restore(ctx context.Context, messageID, group, actor string) (int, error) {
	res, err := b.RestoreMessage(ctx, messageID, group, actor)
	return res.Restored, err
}

// RestoreSkip is a deleted dead letter a restore left as it was, and why.
type RestoreSkip struct {
	Group  string
	Reason string
}

// Why a restore skips a deleted dead letter: a group holds one dead
// letter of a message at most.
const (
	// SkipDeadLetterAgain: the group's dead letter of the message is there
	// again (it read the message again, after a seek or when it was
	// removed and came back, and failed it again).
	SkipDeadLetterAgain = "it is a dead letter again (filed anew after the delete)"
	// SkipDeletedAgain: the group's dead letter came back and was deleted
	// again; the latest deletion is the one restored.
	SkipDeletedAgain = "it was filed anew and deleted again later: the latest is restored"
)

// RestoreResult is what RestoreMessage did.
type RestoreResult struct {
	Restored int
	Skipped  []RestoreSkip // a deleted dead letter each, still within its window
}

// RestoreMessage is Restore, saying also which deleted dead letters it
// left as they were, and why: those whose group has a dead letter of the
// message again, and of a group whose dead letter was deleted more than
// once within the window, all but the latest deletion. The others are
// restored. Nothing to restore but skipped ones is ErrConflict naming
// them, and nothing changes.
func (b *Broker) RestoreMessage(ctx context.Context, messageID, group, actor string) (RestoreResult, error) {
	ms, seq, ok := ParseMessageID(messageID)
	if !ok {
		return RestoreResult{}, errorf(ErrNotFound, "dead letter %q not found", truncate(messageID, 64))
	}
	var res RestoreResult
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		res = RestoreResult{}
		now := b.now()
		var gid int64
		if group != "" {
			var err error
			if gid, err = tx.GroupID(ctx, group, false); isNotFound(err) {
				return errorf(ErrNotFound, "nothing of message %s in consumer group %q can be restored", messageID, truncate(group, 64))
			} else if err != nil {
				return err
			}
		}
		rs, err := tx.Restorable(ctx, seq, gid, 0, now, 0)
		if err != nil {
			return fmt.Errorf("restorable: %w", err)
		}
		if len(rs) > 0 && rs[0].DeadLetter.CreatedAt.UnixMilli() != ms {
			rs = nil // the id names another message
		}
		rs, older := latestPerGroup(rs)
		for _, r := range older {
			name, err := tx.GroupName(ctx, r.DeadLetter.GroupID)
			if err != nil {
				return fmt.Errorf("restore: group: %w", err)
			}
			res.Skipped = append(res.Skipped, RestoreSkip{Group: name, Reason: SkipDeletedAgain})
		}
		back, err := deletedButBack(ctx, tx, seq, ms, gid, now)
		if err != nil {
			return err
		}
		res.Skipped = append(res.Skipped, back...)
		if len(rs) == 0 {
			if len(res.Skipped) > 0 {
				return errorf(ErrConflict, "nothing of message %s can be restored: %s", messageID, SkipsText(res.Skipped))
			}
			return errorf(ErrNotFound, "nothing of message %s can be restored (never deleted, restored already, or its restore window has ended)", messageID)
		}
		queues, err := restoreRemoved(ctx, tx, now, rs, actor)
		if err != nil {
			return err
		}
		for _, q := range queues {
			touched(q)
		}
		res.Restored = len(rs)
		detail := fmt.Sprintf("message %s restored", messageID)
		if len(res.Skipped) > 0 {
			detail += fmt.Sprintf("; %d not restored: %s", len(res.Skipped), SkipsText(res.Skipped))
		}
		return audit(ctx, tx, now, actor, AuditRestore, strings.Join(queues, ","), groupsOfRemoved(ctx, tx, rs), res.Restored, detail)
	})
	return res, err
}

// SkipsText says what skips are, for an operator: "group billing's: why;
// group audit's: why".
func SkipsText(skips []RestoreSkip) string {
	parts := make([]string, len(skips))
	for i, k := range skips {
		parts[i] = fmt.Sprintf("group %s's: %s", truncate(k.Group, 64), k.Reason)
	}
	return strings.Join(parts, "; ")
}

// latestPerGroup keeps of rs (in removed_dead_letters order, oldest
// first) the latest of each (message, group), and returns the older ones
// apart: a group holds one dead letter of a message at most, and the
// latest deletion is the one it had last.
func latestPerGroup(rs []RemovedDeadLetter) (keep, older []RemovedDeadLetter) {
	type key struct{ seq, g int64 }
	last := map[key]int{}
	for i, r := range rs {
		last[key{r.DeadLetter.Seq, r.DeadLetter.GroupID}] = i
	}
	for i, r := range rs {
		if last[key{r.DeadLetter.Seq, r.DeadLetter.GroupID}] == i {
			keep = append(keep, r)
		} else {
			older = append(older, r)
		}
	}
	return keep, older
}

// deletedButBack returns a skip for each deleted dead letter of message
// seq (of group groupID alone when not 0) still within its window whose
// group has a dead letter of the message again (Restorable leaves those
// out). ms is the message's time, from its id: another message's are
// none.
func deletedButBack(ctx context.Context, tx deadLetterHistoryTx, seq, ms, groupID int64, now time.Time) ([]RestoreSkip, error) {
	live, err := tx.DeadLettersOfMessage(ctx, seq)
	if err != nil || len(live) == 0 || live[0].CreatedAt.UnixMilli() != ms {
		return nil, err
	}
	again := map[int64]bool{}
	for _, d := range live {
		again[d.GroupID] = true
	}
	ds, err := tx.DeletionsOf(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("restore: deletions: %w", err)
	}
	var out []RestoreSkip
	for _, r := range ds {
		d := r.DeadLetter
		if (groupID == 0 || d.GroupID == groupID) && again[d.GroupID] && r.RestoredAt.IsZero() && r.RestoreUntil.After(now) {
			out = append(out, RestoreSkip{Group: d.Group, Reason: SkipDeadLetterAgain})
		}
	}
	return out, nil
}

// restoreTx is what restoring removed dead letters reads and writes.
type restoreTx interface {
	DeadLetterTx
	ErrorGroupStateTx
	QueueTx
	RemovedTx
	StatsTx
}

// restoreRemoved files the removed dead letters rs again and marks them
// restored; it returns the names of their queues.
func restoreRemoved(ctx context.Context, tx restoreTx, now time.Time, rs []RemovedDeadLetter, actor string) ([]string, error) {
	ids := make([]int64, len(rs))
	type key struct{ q, g int64 }
	depth := map[key]int64{}
	var order []key
	var queues []string
	seenQ := map[int64]bool{}
	for i, r := range rs {
		ids[i] = r.ID
		d := r.DeadLetter
		d.ID = 0
		if err := tx.InsertDeadLetter(ctx, &d, false); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		// The removal is undone in its error group's funnel, in the hour
		// it was counted in.
		back := Funnel{Deleted: -1}
		if r.How == RemovedExpired {
			back = Funnel{Expired: -1}
		}
		if _, err := tx.AddErrorGroupFunnel(ctx, ErrorGroupKey{QueueID: d.QueueID, GroupID: d.GroupID, Fingerprint: d.Fingerprint}, back, r.At); err != nil {
			return nil, fmt.Errorf("restore: error group: %w", err)
		}
		k := key{d.QueueID, d.GroupID}
		if depth[k] == 0 {
			order = append(order, k)
		}
		depth[k]++
		if !seenQ[d.QueueID] {
			seenQ[d.QueueID] = true
			q, err := tx.QueueByID(ctx, d.QueueID)
			if err != nil {
				return nil, fmt.Errorf("restore: queue: %w", err)
			}
			queues = append(queues, q.Name)
		}
	}
	for _, k := range order {
		if err := tx.AddStats(ctx, k.q, k.g, Stats{Depth: depth[k]}, time.Time{}); err != nil {
			return nil, fmt.Errorf("restore: stats: %w", err)
		}
	}
	if err := tx.MarkRestored(ctx, ids, now, actor); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	return queues, nil
}

// groupsOfRemoved names the groups of rs, for the audit.
func groupsOfRemoved(ctx context.Context, tx SubscriptionTx, rs []RemovedDeadLetter) string {
	seen := map[int64]bool{}
	var names []string
	for _, r := range rs {
		if seen[r.DeadLetter.GroupID] {
			continue
		}
		seen[r.DeadLetter.GroupID] = true
		if n, err := tx.GroupName(ctx, r.DeadLetter.GroupID); err == nil {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

// SweepHistory is the maintenance of what deletes and replays keep: the
// deleted dead letters whose restore window ended are cut to their
// record, and history older than HistoryRetention goes, a chunk a
// transaction written as background (UpdateOptions.Background).
func (b *Broker) SweepHistory(ctx context.Context) error {
	var r TaskReport
	return b.maintainHistory(ctx, &r)
}
