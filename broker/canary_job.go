package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Canary limits (SPEC section 4 leaves them to us).
const (
	MaxCanaryCount             = 100
	MaxCanarySettleSeconds     = 86400
	DefaultCanarySettleSeconds = 120
)

// AuditJobCanary is the broker's entry of a canary replayed, and of one
// that passed (one that failed is AuditJobPause's).
const AuditJobCanary = "job_canary"

// Canary copy outcomes, as CanaryCopy.Outcome says them.
const (
	CanaryPending   = "pending"
	CanarySucceeded = "succeeded"
	CanaryFailedOut = "failed"
)

// CanaryOutcome is a copy's outcome in one group whose dead letter it
// replaced, with the group's error when the copy failed again and is its
// dead letter now (CopyOutcomes).
type CanaryOutcome struct {
	CopySeq int64
	CopyOutcome
	Error string
}

// DrawKeys asks DrawDeadLetterKeys for the dead letters at Ranks (0-based,
// ascending) of Filter's rows, newest failure first.
type DrawKeys struct {
	Filter Filter
	Ranks  []int64
}

// validate checks c (SettleSeconds 0 takes the default).
func (c *Canary) validate() error {
	if c.Count < 1 || c.Count > MaxCanaryCount {
		return errorf(ErrInvalid, "canary.count must be between 1 and %d", MaxCanaryCount)
	}
	if c.SettleSeconds == 0 {
		c.SettleSeconds = DefaultCanarySettleSeconds
	}
	if c.SettleSeconds < 1 || c.SettleSeconds > MaxCanarySettleSeconds {
		return errorf(ErrInvalid, "canary.settleSeconds must be between 1 and %d (default %d)", MaxCanarySettleSeconds, DefaultCanarySettleSeconds)
	}
	if c.MaxFailed < 0 || c.MaxFailed >= c.Count {
		return errorf(ErrInvalid, "canary.maxFailed must be between 0 and count-1 (%d)", c.Count-1)
	}
	return nil
}

// seed takes one number of the broker's randomness (Config.Rand).
func (b *Broker) seed() uint64 {
	if b.rand == nil {
		return rand.Uint64()
	}
	b.randMu.Lock()
	defer b.randMu.Unlock()
	return b.rand.Uint64()
}

// DrawRanks draws count distinct ranks of [0, n) from seed, ascending
// (every rank when count >= n): what a canary of count takes of a frozen
// set of n, the same for the same seed.
func DrawRanks(seed uint64, n int64, count int) []int64 {
	if n <= 0 {
		return nil
	}
	if int64(count) >= n {
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(i)
		}
		return out
	}
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	chosen := make(map[int64]bool, count)
	out := make([]int64, 0, count)
	// Floyd's: count draws, each distinct, without a list of n.
	for j := n - int64(count); j < n; j++ {
		t := r.Int64N(j + 1)
		if chosen[t] {
			t = j
		}
		chosen[t] = true
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// canaryFirst returns ids with the canary's draw of them first (in the
// order they were given), then the rest in theirs: a new slice.
func canaryFirst(ids []string, c *JobCanary) []string {
	ranks := DrawRanks(c.Seed, int64(len(ids)), c.Count)
	drawn := make(map[int64]bool, len(ranks))
	for _, r := range ranks {
		drawn[r] = true
	}
	out := make([]string, 0, len(ids))
	for i, id := range ids {
		if drawn[int64(i)] {
			out = append(out, id)
		}
	}
	for i, id := range ids {
		if !drawn[int64(i)] {
			out = append(out, id)
		}
	}
	return out
}

// canarySize is how many ids of a job by ids its canary takes.
func canarySize(j Job) int { return min(j.Canary.Count, len(j.Scope.IDs)) }

// canaryActive reports whether j's canary is to be replayed or settled
// before anything else of j is done.
func (j Job) canaryActive() bool {
	return j.Kind == JobReplay && j.Canary != nil && (j.Canary.State == CanaryDrawn || j.Canary.State == CanarySettling)
}

// canaryStepTx is what a canary's step reads and writes: its replay
// (replayCanaryTx), the holds it waits behind, the audit and the events
// it raises (raiseTx).
type canaryStepTx interface {
	replayCanaryTx
	HoldTx
	AuditTx
	raiseTx
}

// canaryStep does j's canary: replays it (drawn), or looks at how its
// copies settled (settling) and pauses j or lets it go on. It reports
// whether the chunk is done (false: the canary passed, the chunk goes
// on with the rest).
func (b *Broker) canaryStep(ctx context.Context, tx canaryStepTx, j *Job, now time.Time, touched func(string)) (bool, error) {
	c := j.Canary
	if c.State == CanaryDrawn {
		if err := b.replayCanary(ctx, tx, j, now, touched); err != nil {
			return false, err
		}
		if len(j.Scope.IDs) > 0 && j.Position < int64(canarySize(*j)) {
			// Cut to the payloads one transaction may copy: the rest of
			// the canary's ids (first in the list) go in the next steps.
			return true, nil
		}
		c.State, c.Until = CanarySettling, now.Add(time.Duration(c.SettleSeconds)*time.Second)
		touched(jobNews)
		if err := tx.InsertAudit(ctx, &AuditEntry{At: now, Actor: BrokerActor, Action: AuditJobCanary, Queue: j.Queue, Count: len(c.Copies), Broker: true,
			Detail: fmt.Sprintf("job #%d: canary of %d replayed, settling up to %d s", j.ID, copiesIn(c.Copies), c.SettleSeconds), JobID: j.ID}); err != nil {
			return false, err
		}
		if len(c.Copies) > 0 {
			return true, nil
		}
		// Nothing to wait for (all gone, or at the replay cap): it passes.
	}
	done, err := settleCanary(ctx, tx, c, now)
	if err != nil || !done {
		return true, err
	}
	copies, failed, waiting := c.tally()
	held := 0
	if waiting > 0 && failed > c.MaxFailed {
		if held, err = waitingHeld(ctx, tx, c); err != nil {
			return false, err
		}
	}
	c.markUnsettled()
	touched(jobNews)
	if failed <= c.MaxFailed {
		c.State = CanaryPassed
		return false, tx.InsertAudit(ctx, &AuditEntry{At: now, Actor: BrokerActor, Action: AuditJobCanary, Queue: j.Queue, Count: copies, Broker: true,
			Detail: fmt.Sprintf("job #%d: canary passed, %d of %d failed again (at most %d may); the rest goes on", j.ID, failed, copies, c.MaxFailed), JobID: j.ID})
	}
	c.State = CanaryFailed
	c.Reason = fmt.Sprintf("canary: %d of %d failed again", failed, copies)
	if waiting > 0 {
		if held == waiting {
			c.Reason += fmt.Sprintf("; %d still waiting behind a hold", waiting)
		} else {
			c.Reason += fmt.Sprintf("; %d not settled within %d s", waiting, c.SettleSeconds)
		}
	}
	j.State, j.Reason = JobPaused, c.Reason
	if err := tx.InsertAudit(ctx, &AuditEntry{At: now, Actor: BrokerActor, Action: AuditJobPause, Queue: j.Queue, Count: int(j.Done), Broker: true,
		Detail: fmt.Sprintf("job #%d paused itself: %s", j.ID, c.Reason), JobID: j.ID}); err != nil {
		return false, err
	}
	return true, b.raise(ctx, tx, Event{Kind: EventJobPaused, Queue: j.Queue, Detail: c.Reason, At: now, JobID: j.ID})
}

// replayCanaryTx is what a canary's replay reads and writes: a replay
// job's (replayJobTx), and the job's own row.
type replayCanaryTx interface {
	replayJobTx
	JobTx
}

// replayCanary replays j's canary: the first ids of a job by ids (put
// first as it started; at most bulkBytes of payloads a step, so a big
// canary takes several), or the dead letters drawn at random of its
// frozen filter (in one transaction, whatever their size: the draw is of
// what is left, so it cannot be split); applyJobKeys records the copies.
func (b *Broker) replayCanary(ctx context.Context, tx replayCanaryTx, j *Job, now time.Time, touched func(string)) error {
	if len(j.Scope.IDs) > 0 {
		_, err := b.idsChunk(ctx, tx, j, now, touched, canarySize(*j)-int(j.Position))
		return err
	}
	q := j.Scope.Filter
	if q == nil || q.Bound == nil {
		return fmt.Errorf("job #%d has neither ids nor a bound filter", j.ID)
	}
	f, ok, err := q.bulkFilter(ctx, tx)
	if err != nil || !ok {
		return err
	}
	if f, ok = within(f, *q.Bound); !ok {
		return nil
	}
	if !j.Scope.Force {
		f.Cap = CapBelow
	}
	// Drawn from what is left of the frozen set now (less what went
	// since it was counted), by rank, newest failure first.
	n, err := countDeadLetters(ctx, tx, f)
	if err != nil {
		return fmt.Errorf("canary: count: %w", err)
	}
	keys, err := tx.DrawDeadLetterKeys(ctx, DrawKeys{Filter: f, Ranks: DrawRanks(j.Canary.Seed, n, j.Canary.Count)})
	if err != nil {
		return fmt.Errorf("canary: draw: %w", err)
	}
	_, _, err = b.replayFilterKeys(ctx, tx, j, now, keys, touched, 0)
	return err
}

// recordCanary adds to j's canary the copies replayKeys made of keys.
func recordCanary(ctx context.Context, tx partitionQueueSubscriptionTx, j *Job, keys []DeadLetterKey, copies []Copy) error {
	groups, parts, queues := map[int64]string{}, map[int64]Partition{}, map[int64]string{}
	for _, k := range keys {
		var cp *Copy
		for i := range copies {
			if copies[i].Seq == k.Seq && (copies[i].GroupID == 0 || copies[i].GroupID == k.GroupID) {
				cp = &copies[i]
				break
			}
		}
		if cp == nil {
			continue
		}
		g, err := memo(groups, k.GroupID, func() (string, error) { return tx.GroupName(ctx, k.GroupID) })
		if err != nil {
			return fmt.Errorf("canary: group: %w", err)
		}
		p, err := memo(parts, cp.PartitionID, func() (Partition, error) { return tx.PartitionByID(ctx, cp.PartitionID) })
		if err != nil {
			return fmt.Errorf("canary: partition: %w", err)
		}
		qn, err := memo(queues, p.QueueID, func() (string, error) {
			q, err := tx.QueueByID(ctx, p.QueueID)
			return q.Name, err
		})
		if err != nil {
			return fmt.Errorf("canary: queue: %w", err)
		}
		j.Canary.Copies = append(j.Canary.Copies, CanaryCopy{DeadLetterID: MessageID(k.CreatedAt, k.Seq), Group: g, Seq: cp.CopySeq,
			Queue: qn, Partition: p.Name, TransactionID: cp.TransactionID, Outcome: CanaryPending})
	}
	return nil
}

// settleCanary brings the outcomes of c's copies up to date; it reports
// whether the canary is settled: every copy in every group, or the
// deadline passed (those still pending then count as failed).
func settleCanary(ctx context.Context, tx JobTx, c *JobCanary, now time.Time) (bool, error) {
	seqs := make([]int64, 0, len(c.Copies))
	for _, cp := range c.Copies {
		seqs = append(seqs, cp.Seq)
	}
	outs, err := tx.CopyOutcomes(ctx, unique(seqs))
	if err != nil {
		return false, fmt.Errorf("canary outcomes: %w", err)
	}
	type key struct {
		seq   int64
		group string
	}
	by := make(map[key]CanaryOutcome, len(outs))
	for _, o := range outs {
		by[key{o.CopySeq, o.Group}] = o
	}
	pending := 0
	for i := range c.Copies {
		cp := &c.Copies[i]
		o, ok := by[key{cp.Seq, cp.Group}]
		switch {
		case !ok || o.Outcome == CopyExpired:
			// Its outcome row went with its queue, or retention took the
			// copy before it was settled: it never worked.
			cp.Outcome = CanaryFailedOut
			if cp.Error == "" {
				cp.Error = "gone before it was settled"
			}
		case o.Outcome == CopySucceeded:
			cp.Outcome, cp.Error = CanarySucceeded, ""
		case o.Outcome == CopyFailed:
			cp.Outcome, cp.Error = CanaryFailedOut, firstLine(o.Error, 200)
		default:
			cp.Outcome = CanaryPending
			pending++
		}
	}
	if pending == 0 {
		return true, nil
	}
	return !now.Before(c.Until), nil
}

// tally counts c's copies (a copy to several groups once), those that
// failed again in any group or are still pending (counted as failed),
// and of those the ones only pending.
func (c *JobCanary) tally() (copies, failed, waiting int) {
	type st struct{ failed, pending bool }
	seen := map[int64]*st{}
	var order []int64
	for _, cp := range c.Copies {
		s := seen[cp.Seq]
		if s == nil {
			s = &st{}
			seen[cp.Seq] = s
			order = append(order, cp.Seq)
		}
		switch cp.Outcome {
		case CanaryFailedOut:
			s.failed = true
		case CanaryPending:
			s.pending = true
		}
	}
	for _, seq := range order {
		s := seen[seq]
		if s.failed || s.pending {
			failed++
		}
		if s.pending && !s.failed {
			waiting++
		}
	}
	return len(order), failed, waiting
}

// holdQueueSubscriptionTx is a transaction for HoldTx, QueueTx and
// SubscriptionTx.
type holdQueueSubscriptionTx interface {
	HoldTx
	QueueTx
	SubscriptionTx
}

// waitingHeld counts the copies of c still pending whose group is held
// now (the queue's or the group's hold; heldFor, through the cache).
func waitingHeld(ctx context.Context, tx holdQueueSubscriptionTx, c *JobCanary) (int, error) {
	held := map[int64]bool{}
	n := 0
	for _, cp := range c.Copies {
		if cp.Outcome != CanaryPending || held[cp.Seq] {
			continue
		}
		q, err := tx.QueueByName(ctx, cp.Queue)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return 0, err
		}
		gid, err := tx.GroupID(ctx, cp.Group, false)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return 0, err
		}
		hs, err := heldFor(ctx, tx, q.ID, gid)
		if err != nil {
			return 0, err
		}
		if hs.Held() {
			held[cp.Seq] = true
			n++
		}
	}
	return n, nil
}

// markUnsettled says of the copies still pending at the deadline that
// they failed (SPEC: the unsettled count as failed).
func (c *JobCanary) markUnsettled() {
	for i := range c.Copies {
		if c.Copies[i].Outcome == CanaryPending {
			c.Copies[i].Outcome, c.Copies[i].Error = CanaryFailedOut, fmt.Sprintf("not settled within %d s", c.SettleSeconds)
		}
	}
}

// copiesIn counts the copies of cs (a copy to several groups once).
func copiesIn(cs []CanaryCopy) int {
	seen := map[int64]bool{}
	for _, c := range cs {
		seen[c.Seq] = true
	}
	return len(seen)
}

// firstLine is s's first line without its control characters (C0 and
// DEL: a stranger's error may carry terminal escapes), cut to n bytes at
// most (a rune boundary): what a reason or an outcome says of an error.
func firstLine(s string, n int) string {
	for i, r := range s {
		if r == '\n' || r == '\r' {
			s = s[:i]
			break
		}
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	return truncate(s, n)
}
