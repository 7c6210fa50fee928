package broker

import (
	"context"
	"fmt"
	"time"
)

// The replay cap (queue option maxReplays, SPEC.md sections 2 and 4): a
// message's replays are counted along its dlq: chain (a copy that is
// dead-lettered and replayed again makes the chain longer). A dead letter
// whose message has been replayed maxReplays times is not replayed again
// (one, bulk or a job) unless the operator forces it; forced replays are
// audited as such.

// ReplayCapTx is what the replay cap needs from storage.
type ReplayCapTx interface {
	// ReplayCounts returns, for each of seqs that is a replayed copy, how
	// many replays along its dlq: chain it is from its original (kept on
	// the copy's row of replays when it was made); a seq that is no copy
	// (an original, or a copy whose row the history sweep took) is left
	// out: 0. It reads replays by its primary key, one probe a seq, and
	// writes and locks nothing.
	ReplayCounts(ctx context.Context, seqs []int64) (map[int64]int, error)
}

// Cap filters of Filter.Cap: a bulk replay by filter that is not forced
// takes only the dead letters below their queue's cap (CapBelow); what
// it left at the cap is counted with CapAt.
const (
	CapBelow = 1 // only dead letters whose message is below its queue's maxReplays (or whose queue has no cap)
	CapAt    = 2 // only dead letters whose message is at or over its queue's maxReplays
)

// ReplayCount is a dead letter's message's replays along its dlq: chain,
// with its queue's cap.
type ReplayCount struct {
	Replays int // replays before this dead letter's message (0: an original)
	Max     int // the queue's maxReplays; 0 no cap
}

// AtCap reports whether a replay of the dead letter needs force.
func (c ReplayCount) AtCap() bool { return c.Max > 0 && c.Replays >= c.Max }

// Reason says why a replay of it is skipped (AtCap).
func (c ReplayCount) Reason() string {
	return fmt.Sprintf("replayed %s already (maxReplays %d)", times(c.Replays), c.Max)
}

// times is n times in words.
func times(n int) string {
	if n == 1 {
		return "1 time"
	}
	return fmt.Sprintf("%d times", n)
}

// replayCounts returns the ReplayCount of each message of keys, by seq,
// with its queue's cap (each queue read once).
func replayCounts(ctx context.Context, tx queueReplayCapTx, keys []DeadLetterKey) (map[int64]ReplayCount, error) {
	seqs := make([]int64, 0, len(keys))
	caps := map[int64]int{}
	for i, k := range keys {
		if i == 0 || k.Seq != keys[i-1].Seq {
			seqs = append(seqs, k.Seq)
		}
		if _, ok := caps[k.QueueID]; !ok {
			q, err := tx.QueueByID(ctx, k.QueueID)
			if err != nil {
				return nil, fmt.Errorf("replay cap: queue: %w", err)
			}
			caps[k.QueueID] = q.Options.MaxReplays
		}
	}
	n, err := tx.ReplayCounts(ctx, seqs)
	if err != nil {
		return nil, fmt.Errorf("replay cap: replays of messages: %w", err)
	}
	out := make(map[int64]ReplayCount, len(seqs))
	for _, k := range keys {
		out[k.Seq] = ReplayCount{Replays: n[k.Seq], Max: caps[k.QueueID]}
	}
	return out, nil
}

// splitAtCap splits keys into those below their cap and those at it (in
// the same order); counts has each key's message.
func splitAtCap(keys []DeadLetterKey, counts map[int64]ReplayCount) (below, at []DeadLetterKey) {
	for _, k := range keys {
		if counts[k.Seq].AtCap() {
			at = append(at, k)
		} else {
			below = append(below, k)
		}
	}
	return below, at
}

// capReason names, for a job's result, why n messages (or dead letters)
// were skipped or forced at the cap.
func capReason(n int64, unit string, forced bool) string {
	if forced {
		return fmt.Sprintf("forced past the replay cap: %d %s replayed that had been replayed maxReplays times already", n, plural(n, unit))
	}
	return fmt.Sprintf("%d %s skipped: replayed maxReplays times already (replay them with force)", n, plural(n, unit))
}

func plural(n int64, unit string) string {
	if n == 1 {
		return unit
	}
	return unit + "s"
}

// finishCappedTx is what finishing a capped replay reads and writes.
type finishCappedTx interface {
	AuditTx
	DeadLetterTx
	partitionQueueSubscriptionTx
}

// finishCapped ends a replay job j at now: a job by filter that was not
// forced counts what it left at the replay cap (its chunks passed over
// them: the dead letters of its filter at or below its bound still at
// the cap, a walk of what the job left); a forced job that replayed
// messages past the cap writes an audit entry of its actor saying how
// many (the job's first entry says it was forced).
func (b *Broker) finishCapped(ctx context.Context, tx finishCappedTx, j *Job, now time.Time) error {
	if j.Kind != JobReplay {
		return nil
	}
	if q := j.Scope.Filter; q != nil && q.Bound != nil && !j.Scope.Force {
		f, ok, err := q.bulkFilter(ctx, tx)
		if err != nil || !ok {
			return err
		}
		if f, ok = within(f, *q.Bound); !ok {
			return nil
		}
		f.Cap = CapAt
		n, err := tx.CountDeadLetters(ctx, f)
		if j.byMessages() && err == nil {
			n, err = tx.CountDeadLetterMessages(ctx, f)
		}
		if err != nil {
			return fmt.Errorf("count what is at the replay cap: %w", err)
		}
		j.Capped = n
	}
	if !j.Scope.Force || j.Capped == 0 {
		return nil
	}
	return tx.InsertAudit(ctx, &AuditEntry{At: now, Actor: j.Actor, Action: AuditReplay, Queue: j.Queue, Group: groupOfScope(j.Scope), Count: int(j.Capped),
		Detail: fmt.Sprintf("job #%d: %s", j.ID, capReason(j.Capped, unitWord(*j), true)), JobID: j.ID})
}

// unitWord is what j's Capped counts, in a word.
func unitWord(j Job) string {
	if len(j.Scope.IDs) > 0 || j.byMessages() {
		return "message"
	}
	return "dead letter"
}
