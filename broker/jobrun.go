package broker

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"time"
)

// MaxJobRate is the highest rate limit a job may be given, in messages a
// second.
const MaxJobRate = 100000

// jobNews is the key of the waiters woken when a job changes (a queue
// name cannot hold a NUL byte: no queue's waiters are woken by it).
const jobNews = "\x00jobs"

// jobFailuresShown is how many of a replay job's failed copies JobDetail
// lists.
const jobFailuresShown = 50

// JobRequest asks for a bulk job: a replay or a delete of the dead
// letters named by IDs (messages' ids), or of those Query selects at or
// below Query.Bound (the confirmation's; nil: taken as the job starts).
type JobRequest struct {
	Kind  string // JobReplay or JobDelete
	IDs   []string
	Group string // with IDs on a delete: only that group's dead letters
	Query *DLQQuery
	Mode  string // a replay: ReplayEveryGroup or ReplayOwnGroup
	// Force, on a replay: messages at their queue's replay cap
	// (maxReplays) are replayed too (else skipped, counted in Capped);
	// audited as forced.
	Force bool
	// Destination, on a replay: where the copies go instead of each
	// message's own partition (nil or empty: there).
	Destination *Destination
	Rate        int // messages (a delete: dead letters) a second at most; 0 no limit
	// Pace: PaceGentle (the default) or PaceFull (flat out).
	Pace string
	// Canary, on a replay: begin with a few drawn at random (nil: none).
	Canary *Canary
	Actor  string
	// Queue names the queue of a job by ids for the list of jobs (the
	// page it was started from); a filter's queue is its own.
	Queue string
	// Scope is the queues the request may see: a job by ids skips the
	// dead letters of the others, as if absent; a job by filter matches
	// within it (Query.Scope is set to it).
	Scope QueueScope
}

func (r *JobRequest) validate() error {
	switch r.Kind {
	case JobReplay, JobDelete:
	default:
		return errorf(ErrInvalid, "a job is a replay or a delete")
	}
	if (r.Query == nil) == (len(r.IDs) == 0) {
		return errorf(ErrInvalid, "give either ids or a filter")
	}
	if len(r.IDs) > MaxBulkIDs {
		return errorf(ErrInvalid, "ids: at most %d per call; use a filter for more", MaxBulkIDs)
	}
	if r.Kind == JobDelete && r.Mode != "" {
		return errorf(ErrInvalid, "a mode goes with a replay")
	}
	if r.Kind != JobReplay && r.Force {
		return errorf(ErrInvalid, "force goes with a replay")
	}
	if r.Destination != nil && r.Destination.Empty() {
		r.Destination = nil
	}
	if r.Destination != nil {
		if r.Kind != JobReplay {
			return errorf(ErrInvalid, "a destination goes with a replay")
		}
		if err := r.Destination.validate(); err != nil {
			return err
		}
	}
	if err := (ReplayOptions{Mode: r.Mode}).validate(); err != nil {
		return err
	}
	if r.Group != "" && (r.Query != nil || (r.Kind == JobReplay && r.Mode != ReplayOwnGroup)) {
		return errorf(ErrInvalid, "a consumer group goes with ids on a delete or a replay to its own group; a filter names its own")
	}
	if r.Canary != nil {
		if r.Kind != JobReplay {
			return errorf(ErrInvalid, "a canary goes with a replay")
		}
		c := *r.Canary
		if err := c.validate(); err != nil {
			return err
		}
		r.Canary = &c
	}
	if r.Pace != PaceGentle && r.Pace != PaceFull {
		return errorf(ErrInvalid, "pace must be %q or empty (the default, gentle)", PaceFull)
	}
	if r.Rate < 0 || r.Rate > MaxJobRate {
		return errorf(ErrInvalid, "rate must be between 0 (no limit) and %d a second", MaxJobRate)
	}
	if r.Query != nil {
		return r.Query.validateBulk()
	}
	r.IDs = unique(r.IDs)
	return nil
}

// byMessages reports whether the job counts messages (a replay to every
// group: a message's dead letters in every group go with one copy)
// rather than dead letters.
func (j Job) byMessages() bool { return j.Kind == JobReplay && j.Scope.Mode == ReplayEveryGroup }

// PlannedUnit names, for people, what Planned counts: "message" (a job by
// ids, or a replay to every group) or "dead letter".
func (j Job) PlannedUnit() string {
	if len(j.Scope.IDs) > 0 || j.byMessages() {
		return "message"
	}
	return "dead letter"
}

// StartJob validates r, counts what it will act on and freezes it (the
// bound of a filter, the ids), stores the job with one audit entry of its
// actor, and leaves the work to RunJobs. A filter's bound is taken and
// what it holds counted from one read snapshot, before the write: a count
// that walks many rows (a filter no kept count answers) then holds no
// other write back. What was counted and is gone by the time the job
// reaches it is counted skipped, as for what goes while it runs. The rest
// is read and written in one transaction.
func (b *Broker) StartJob(ctx context.Context, r JobRequest) (Job, error) {
	if err := r.validate(); err != nil {
		return Job{}, err
	}
	var counted *Bound // a filter's, taken with planned
	var planned, plannedMessages int64
	if r.Query != nil {
		q := *r.Query
		q.Scope = q.Scope.Narrow(r.Scope)
		err := b.store.View(ctx, func(tx Tx) error {
			f, bound, ok, err := b.frozen(ctx, tx, q)
			if err != nil {
				return err
			}
			counted, planned, plannedMessages = &bound, 0, 0
			if ok {
				planned, plannedMessages, err = countDeadLettersAndMessages(ctx, tx, f)
			}
			return err
		})
		if err != nil {
			return Job{}, err
		}
	}
	var seed uint64
	if r.Canary != nil {
		seed = b.seed() // once: the transaction may run twice
	}
	var j Job
	err := b.update(ctx, func(tx Tx, touched func(string)) (err error) {
		now := b.now()
		j = Job{Kind: r.Kind, State: JobRunning, Actor: r.Actor, CreatedAt: now, UpdatedAt: now, Queue: r.Queue, Rate: r.Rate, ArrivedSince: -1,
			Scope: JobScope{IDs: r.IDs, Group: r.Group, Mode: r.Mode, Force: r.Force, Destination: r.Destination, Pace: r.Pace}, PausePercent: DefaultPausePercent, PauseWindow: DefaultPauseWindow}
		if !r.Scope.All() && len(r.IDs) > 0 {
			sc := r.Scope
			j.Scope.Queues = &sc
		}
		if r.Query != nil {
			q := *r.Query
			q.Scope = q.Scope.Narrow(r.Scope)
			q.Bound = counted // and planned counted up to it
			bound := *counted
			j.Queue = q.Queue
			j.Planned = planned
			if j.byMessages() {
				j.Planned = plannedMessages
			}
			j.Scope.Filter = &q
			j.Description = fmt.Sprintf("%s matching %s, at or below %s", j.unit(), q.Describe(), bound)
		} else {
			j.Planned = int64(len(r.IDs))
			j.Description = fmt.Sprintf("%d ids by list", len(r.IDs))
			if r.Group != "" {
				j.Description += fmt.Sprintf(", group %q only", truncate(r.Group, 64))
			}
			if j.Queue == "" {
				// The queue of the ids' dead letters, when they are all of
				// one: its auto-pause rule, and the job listed with it.
				if j.Queue, err = queueOfIDs(ctx, tx, r.IDs, r.Group); err != nil {
					return err
				}
				if !r.Scope.Allows(j.Queue) {
					j.Queue = "" // out of the request's scope: not named to it
				}
			}
		}
		if j.Kind == JobReplay && j.Scope.Mode == ReplayOwnGroup {
			j.Description += ", each to the group that gave up on it only"
		}
		if c := r.Canary; c != nil {
			j.Canary = &JobCanary{Canary: *c, State: CanaryDrawn, DrawnAt: now, Seed: seed}
			if len(j.Scope.IDs) > 0 {
				// The draw, by ids: those drawn go first, so that the
				// canary is the first chunk and nothing is done twice.
				j.Scope.IDs = canaryFirst(j.Scope.IDs, j.Canary)
			}
			j.Description += fmt.Sprintf(", beginning with a canary of %d drawn at random (settling up to %d s, pausing the job if %s)", c.Count, c.SettleSeconds, canaryLimitWords(c.MaxFailed))
		}
		if j.Scope.Force {
			j.Description += ", forced past the replay cap (maxReplays)"
		}
		if d := j.Scope.Destination; d != nil {
			j.Description += ", to " + d.String()
		}
		if j.Queue != "" {
			if qu, err := tx.QueueByName(ctx, j.Queue); err == nil {
				j.PausePercent, j.PauseWindow = qu.Options.ReplayPausePercent, qu.Options.ReplayPauseWindow
			} else if !isNotFound(err) {
				return err
			}
		}
		if err := tx.InsertJob(ctx, &j); err != nil {
			return fmt.Errorf("job: %w", err)
		}
		touched(jobNews)
		return tx.InsertAudit(ctx, &AuditEntry{At: now, Actor: r.Actor, Action: j.Kind, Queue: j.Queue, Group: groupOfScope(j.Scope), Count: int(j.Planned),
			Detail: fmt.Sprintf("job #%d: %s", j.ID, j.Description), JobID: j.ID})
	})
	if err != nil {
		return Job{}, err
	}
	return j, nil
}

// queueOfIDs names the queue of the dead letters of the messages ids
// (only group's when set) when they are all of one queue, else "".
func queueOfIDs(ctx context.Context, tx deadLetterQueueSubscriptionTx, ids []string, group string) (string, error) {
	keys, _, err := keysOfIDs(ctx, tx, ids, group)
	if err != nil || len(keys) == 0 {
		return "", err
	}
	for _, k := range keys {
		if k.QueueID != keys[0].QueueID {
			return "", nil
		}
	}
	q, err := tx.QueueByID(ctx, keys[0].QueueID)
	if err != nil {
		return "", fmt.Errorf("queue: %w", err)
	}
	return q.Name, nil
}

// unit names what the job counts.
func (j Job) unit() string {
	switch {
	case j.byMessages():
		return "messages (their dead letters in every group)"
	case j.Kind == JobRestore:
		return "deleted dead letters"
	default:
		return "dead letters"
	}
}

func groupOfScope(s JobScope) string {
	if s.Filter != nil {
		return s.Filter.Group
	}
	return s.Group
}

// JobView is a job with what it led to: a replay's outcomes per group
// and its copies that failed again (the most recent JobFailuresShown).
type JobView struct {
	Job
	Outcomes []JobOutcome
	Failures []JobFailure
	// A delete's: how many of its dead letters can still be restored,
	// until when the last of them can, and whether UndoJob would act
	// (not undone yet, or its restore was cancelled).
	Restorable      int64
	RestorableUntil time.Time
	Undoable        bool
}

// JobDetail reads a job with its outcomes, from one snapshot.
func (b *Broker) JobDetail(ctx context.Context, id int64) (JobView, error) {
	var v JobView
	err := b.store.View(ctx, func(tx Tx) (err error) {
		if v.Job, err = jobByID(ctx, tx, id); err != nil {
			return err
		}
		if v.Kind == JobDelete {
			if v.Restorable, v.RestorableUntil, err = tx.CountRestorable(ctx, id, b.now()); err != nil {
				return fmt.Errorf("job restorable: %w", err)
			}
			v.Undoable = v.Restorable > 0 || !v.Finished()
			if v.UndoneBy != 0 {
				prev, err := tx.Job(ctx, v.UndoneBy)
				if err != nil && !isNotFound(err) {
					return err
				}
				v.Undoable = v.Undoable && err == nil && prev.State == JobCancelled
			}
			return nil
		}
		if v.Kind != JobReplay {
			return nil
		}
		if v.Outcomes, err = tx.JobOutcomes(ctx, id); err != nil {
			return fmt.Errorf("job outcomes: %w", err)
		}
		v.Failures, err = tx.JobFailures(ctx, id, jobFailuresShown)
		return err
	})
	return v, err
}

func jobByID(ctx context.Context, tx JobTx, id int64) (Job, error) {
	j, err := tx.Job(ctx, id)
	if isNotFound(err) {
		return j, errorf(ErrNotFound, "job #%d not found", id)
	}
	return j, err
}

// Jobs lists jobs, newest first.
func (b *Broker) Jobs(ctx context.Context, f JobFilter, p Page) ([]Job, error) {
	if p.Limit <= 0 || p.Limit > MaxPageSize {
		p.Limit = 100
	}
	var out []Job
	err := b.store.View(ctx, func(tx Tx) (err error) {
		if f.Scope.All() || (f.Queue != "" && !f.Scope.Allows(f.Queue)) {
			if !f.Scope.All() {
				return nil // a queue out of scope: no jobs
			}
			out, err = tx.Jobs(ctx, f, p)
			return err
		}
		// Within a scope: pages of jobs read newest first, the others
		// passed over, until p.Limit are kept or the jobs end (jobs are
		// few: the history's retention sweeps them).
		for {
			page, err := tx.Jobs(ctx, f, p)
			if err != nil {
				return err
			}
			for _, j := range page {
				if JobInScope(f.Scope, j) && len(out) < p.Limit {
					out = append(out, j)
				}
			}
			if len(out) >= p.Limit || len(page) < p.Limit {
				return nil
			}
			p.After = &Cursor{ID: page[len(page)-1].ID}
		}
	})
	return out, err
}

// PauseJob pauses a running job: it stops after the chunk it is in.
func (b *Broker) PauseJob(ctx context.Context, id int64, actor string) (Job, error) {
	return b.changeJob(ctx, id, actor, AuditJobPause, func(j *Job, now time.Time) error {
		if j.State != JobRunning {
			return errorf(ErrConflict, "job #%d is %s: only a running job can be paused", j.ID, j.State)
		}
		j.State, j.Reason = JobPaused, "paused by "+actor
		return nil
	})
}

// ResumeJob runs a paused (or failed) job again, from where it stopped.
// A replay's auto-pause window starts empty again.
func (b *Broker) ResumeJob(ctx context.Context, id int64, actor string) (Job, error) {
	j, err := b.changeJob(ctx, id, actor, AuditJobResume, func(j *Job, now time.Time) error {
		if j.State != JobPaused && j.State != JobFailed {
			return errorf(ErrConflict, "job #%d is %s: only a paused or failed job can be resumed", j.ID, j.State)
		}
		j.State, j.Reason, j.FinishedAt, j.Failed = JobRunning, "", time.Time{}, 0
		j.Recent, j.RecentN = 0, 0
		return nil
	})
	return j, err
}

// CancelJob stops a job for good: what it did stays done, the rest is
// left untouched.
func (b *Broker) CancelJob(ctx context.Context, id int64, actor string) (Job, error) {
	return b.changeJob(ctx, id, actor, AuditJobCancel, func(j *Job, now time.Time) error {
		if j.Finished() && j.State != JobFailed {
			return errorf(ErrConflict, "job #%d is %s already", j.ID, j.State)
		}
		j.State, j.Reason, j.FinishedAt = JobCancelled, "cancelled by "+actor, now
		return nil
	})
}

// changeJob applies change to job id in one transaction, with an audit
// entry of actor.
func (b *Broker) changeJob(ctx context.Context, id int64, actor, action string, change func(*Job, time.Time) error) (Job, error) {
	var j Job
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		now := b.now()
		var err error
		if j, err = jobByID(ctx, tx, id); err != nil {
			return err
		}
		if err := change(&j, now); err != nil {
			return err
		}
		j.UpdatedAt = now
		if err := tx.SaveJob(ctx, &j); err != nil {
			return err
		}
		touched(jobNews)
		return tx.InsertAudit(ctx, &AuditEntry{At: now, Actor: actor, Action: action, Queue: j.Queue, Count: int(j.Done),
			Detail: fmt.Sprintf("job #%d (%s): %s, %d of %d done", j.ID, j.Kind, j.State, j.Done, j.Planned), JobID: j.ID})
	})
	return j, err
}

// UndoJob undoes a delete job: it starts a restore job that puts back,
// within their restore window, the dead letters the delete job removed
// (a delete still running is cancelled first). It returns the restore
// job; or, for a delete undone before it deleted anything, the delete
// job itself, cancelled.
func (b *Broker) UndoJob(ctx context.Context, id int64, actor string) (Job, error) {
	var r Job
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		now := b.now()
		j, err := jobByID(ctx, tx, id)
		if err != nil {
			return err
		}
		if j.Kind != JobDelete {
			return errorf(ErrConflict, "job #%d is a %s: only a delete can be undone", j.ID, j.Kind)
		}
		if j.UndoneBy != 0 {
			// Undone already, unless that restore was cancelled: then
			// what it had not restored yet may be.
			prev, err := tx.Job(ctx, j.UndoneBy)
			if err != nil && !isNotFound(err) {
				return err
			}
			if err == nil && prev.State != JobCancelled {
				return errorf(ErrConflict, "job #%d was undone already, by job #%d", j.ID, j.UndoneBy)
			}
		}
		n, _, err := tx.CountRestorable(ctx, j.ID, now)
		if err != nil {
			return err
		}
		if n == 0 && !j.Finished() {
			// Undone before it deleted anything: it is only cancelled.
			j.State, j.Reason, j.FinishedAt, j.UpdatedAt = JobCancelled, "undone by "+actor+" before it deleted anything", now, now
			r = j
			touched(jobNews)
			if err := tx.SaveJob(ctx, &j); err != nil {
				return err
			}
			return tx.InsertAudit(ctx, &AuditEntry{At: now, Actor: actor, Action: AuditJobCancel, Queue: j.Queue,
				Detail: fmt.Sprintf("job #%d (delete): undone before it deleted anything", j.ID), JobID: j.ID})
		}
		if n == 0 {
			return errorf(ErrConflict, "nothing job #%d deleted can be restored: its restore window (%s) has ended, or it was restored already", j.ID, b.restoreWindow)
		}
		r = Job{Kind: JobRestore, State: JobRunning, Actor: actor, CreatedAt: now, UpdatedAt: now, Queue: j.Queue, Planned: n, ArrivedSince: -1,
			UndoOf: j.ID, Description: fmt.Sprintf("the dead letters job #%d deleted", j.ID), PausePercent: j.PausePercent, PauseWindow: j.PauseWindow}
		if err := tx.InsertJob(ctx, &r); err != nil {
			return err
		}
		if !j.Finished() {
			j.State, j.Reason, j.FinishedAt = JobCancelled, fmt.Sprintf("undone by %s (job #%d)", actor, r.ID), now
		}
		j.UndoneBy, j.UpdatedAt = r.ID, now
		if err := tx.SaveJob(ctx, &j); err != nil {
			return err
		}
		touched(jobNews)
		return tx.InsertAudit(ctx, &AuditEntry{At: now, Actor: actor, Action: AuditRestore, Queue: j.Queue, Count: int(n),
			Detail: fmt.Sprintf("job #%d: undo of job #%d, %d dead letters to restore", r.ID, j.ID, n), JobID: r.ID})
	})
	return r, err
}

// WaitJob returns the job once it has finished or is paused (or ctx
// ends). It needs RunJobs running, or another caller running the job's
// chunks (RunJob).
func (b *Broker) WaitJob(ctx context.Context, id int64) (Job, error) {
	for {
		news := b.watch(jobNews)
		var j Job
		if err := b.store.View(ctx, func(tx Tx) (err error) {
			j, err = jobByID(ctx, tx, id)
			return err
		}); err != nil {
			return j, err
		}
		if j.Finished() || j.State == JobPaused {
			return j, nil
		}
		select {
		case <-news:
		case <-ctx.Done():
			return j, ctx.Err()
		case <-b.closed:
			return j, errorf(ErrUnavailable, "the broker is stopping")
		}
	}
}

// RunJob runs job id's chunks in the caller until it is finished or
// paused, without its rate limit (for tools and tests; the server's jobs
// are run by RunJobs).
func (b *Broker) RunJob(ctx context.Context, id int64) (Job, error) {
	for {
		j, err := b.runChunk(ctx, id)
		if err != nil || j.State != JobRunning {
			return j, err
		}
		if err := ctx.Err(); err != nil {
			return j, err
		}
	}
}

// StepJob runs one chunk of job id in the caller, and returns the job as
// it left it (for tools and tests).
func (b *Broker) StepJob(ctx context.Context, id int64) (Job, error) { return b.runChunk(ctx, id) }

// jobRetries is how many chunks in a row may fail before a job is marked
// failed; the waits between them double from a second.
const jobRetries = 5

// RunJobs runs the running jobs (those of before a restart included) in
// the background until ctx ends: a chunk of each in turn, each chunk a
// low-priority transaction that also records the job's progress (so that
// a job resumes exactly where it stopped), a rate-limited job no faster
// than its rate. A chunk that fails is tried again after a wait; after
// jobRetries failures in a row the job is marked failed, with the reason.
func (b *Broker) RunJobs(ctx context.Context) {
	type pace struct {
		next     time.Time // not before
		fails    int
		settling bool // next is its canary's deadline
	}
	paces := map[int64]*pace{}
	// gentleNext: no chunk of a job at the default pace before it, after
	// a chunk that traffic came beside (restAfter); one for them all, so
	// that jobs beside each other take the share together.
	var gentleNext time.Time
	// changed: news of the jobs since the last look, which a canary copy
	// settling is (settleCopy): a settling canary is looked at then,
	// whatever its pace (its deadline).
	var changed <-chan struct{}
	for {
		// Watched before the look, so that no news between the look and
		// the wait is missed: a job started or changed by another process
		// on the same store comes as news (Notifier).
		woken := changed == nil
		if !woken {
			select {
			case <-changed:
				woken = true
			default:
			}
		}
		changed = b.watch(jobNews)
		var running []Job
		err := b.store.View(ctx, func(tx Tx) (err error) {
			running, err = tx.Jobs(ctx, JobFilter{State: JobRunning}, Page{Limit: MaxPageSize})
			return err
		})
		if ctx.Err() != nil {
			return
		}
		var wait time.Duration = -1 // none: until woken
		if err != nil {
			b.log.ErrorContext(ctx, "jobs: list running jobs", "err", err)
			wait = time.Second
		}
		slices.Reverse(running) // oldest first
		now := time.Now()
		ran := false
		live := map[int64]bool{}
		for _, j := range running {
			live[j.ID] = true
			p := paces[j.ID]
			if p == nil {
				p = &pace{next: now}
				paces[j.ID] = p
			}
			next := p.next
			if j.Scope.Pace != PaceFull && gentleNext.After(next) {
				next = gentleNext
			}
			if d := time.Until(next); d > 0 && !(woken && j.canaryActive()) {
				if wait < 0 || d < wait {
					wait = d
				}
				continue
			}
			before := j.Done + j.Skipped
			after, began, err := b.runChunkTimed(ctx, j.ID)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				ran = true
				p.fails++
				b.log.ErrorContext(ctx, "jobs: a chunk failed", "job", j.ID, "kind", j.Kind, "fails", p.fails, "err", err)
				if p.fails >= jobRetries {
					b.failJob(ctx, j.ID, err)
					delete(paces, j.ID)
					continue
				}
				p.next = time.Now().Add(time.Second << (p.fails - 1))
				continue
			}
			p.fails = 0
			if after.State == JobRunning && after.canaryActive() {
				// Settling: looked at again at its deadline, or on news
				// of a copy settled; not counted as work done.
				p.next, p.settling = time.Now().Add(after.Canary.Until.Sub(b.now())), true
				if d := time.Until(p.next); wait < 0 || d < wait {
					wait = max(d, 0)
				}
				continue
			}
			ran = true
			if p.settling {
				p.next, p.settling = time.Now(), false // the deadline is no pace
			}
			if j.Rate > 0 {
				// The next chunk when this one's share of the rate is
				// spent, counted from when this one was due (or from a
				// second ago, after a pause): the rate holds on average.
				start := p.next
				if floor := time.Now().Add(-time.Second); start.Before(floor) {
					start = floor
				}
				p.next = start.Add(time.Duration(after.Done+after.Skipped-before) * time.Second / time.Duration(j.Rate))
			}
			if rest := b.restAfter(j.Scope.Pace, began, time.Since(began)); rest > 0 {
				gentleNext = time.Now().Add(rest)
			}
		}
		for id := range paces {
			if !live[id] {
				delete(paces, id)
			}
		}
		if ran {
			continue
		}
		var timer <-chan time.Time
		var t *time.Timer
		if wait >= 0 {
			t = time.NewTimer(wait)
			timer = t.C
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// failJob marks a job failed after its chunks kept failing: what it did
// stays done, what is left is counted as failed, and a resume tries
// again.
func (b *Broker) failJob(ctx context.Context, id int64, cause error) {
	reason := "it stopped on a storage error (see the server's log); resume it to try again"
	if errors.Is(cause, ErrUnavailable) {
		reason = "the database stayed busy or full; resume it to try again"
	}
	ctx = context.WithoutCancel(ctx)
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		now := b.now()
		j, err := jobByID(ctx, tx, id)
		if err != nil || j.State != JobRunning {
			return err
		}
		j.State, j.Reason, j.FinishedAt, j.UpdatedAt = JobFailed, reason, now, now
		j.Failed = j.Left()
		touched(jobNews)
		if err := tx.SaveJob(ctx, &j); err != nil {
			return err
		}
		return tx.InsertAudit(ctx, &AuditEntry{At: now, Actor: BrokerActor, Action: AuditJobFail, Queue: j.Queue, Count: int(j.Done), Broker: true,
			Detail: fmt.Sprintf("job #%d failed: %s", j.ID, reason), JobID: j.ID})
	})
	if err != nil {
		b.log.ErrorContext(ctx, "jobs: mark a job failed", "job", id, "err", err)
	}
}

// chunkSize is how much one chunk of j takes: the bulk chunk, smaller
// under a rate limit so that the rate is kept evenly (about ten chunks a
// second).
func chunkSize(j Job, full int) int {
	if j.Rate > 0 {
		return min(full, max(1, j.Rate/10))
	}
	return full
}

// runChunk does the next chunk of job id, in one low-priority
// transaction with the job's progress, and returns the job as it left it.
// A job that is not running is returned as it is.
func (b *Broker) runChunk(ctx context.Context, id int64) (Job, error) {
	j, _, err := b.runChunkTimed(ctx, id)
	return j, err
}

// runChunkTimed is runChunk, and says when the chunk began (its
// transaction's work, not its wait for the writer).
func (b *Broker) runChunkTimed(ctx context.Context, id int64) (Job, time.Time, error) {
	var j Job
	var began time.Time
	err := b.updateWith(ctx, background, func(tx Tx, _ UpdateOptions, touched func(string)) error {
		began = time.Now()
		now := b.now()
		var err error
		if j, err = jobByID(ctx, tx, id); err != nil || j.State != JobRunning {
			return err
		}
		var finished bool
		if j.canaryActive() {
			done, err := b.canaryStep(ctx, tx, &j, now, touched)
			if err != nil {
				return err
			}
			if done {
				j.UpdatedAt = now
				return tx.SaveJob(ctx, &j)
			}
		}
		switch {
		case j.Kind == JobRestore:
			finished, err = b.restoreChunk(ctx, tx, &j, now, touched)
		case len(j.Scope.IDs) > 0:
			finished, err = b.idsChunk(ctx, tx, &j, now, touched, 0)
		default:
			finished, err = b.filterChunk(ctx, tx, &j, now, touched)
		}
		if err != nil {
			return err
		}
		if finished {
			j.State, j.FinishedAt = JobDone, now
			if f := j.Scope.Filter; f != nil && f.Bound != nil {
				// What matches with a row id above the bound was filed
				// since, and not touched.
				flt, ok, err := f.bulkFilter(ctx, tx)
				if err != nil {
					return err
				}
				j.ArrivedSince = 0
				if ok {
					if j.ArrivedSince, err = tx.CountDeadLettersAbove(ctx, flt, *f.Bound, j.ID); err != nil {
						return fmt.Errorf("count what arrived since: %w", err)
					}
				}
			}
			if len(j.Scope.IDs) == 0 {
				// Counted, then gone before the job reached them, or
				// left at the replay cap.
				j.Skipped = max(j.Planned-j.Done, 0)
			}
			if err := b.finishCapped(ctx, tx, &j, now); err != nil {
				return err
			}
			touched(jobNews)
		}
		j.UpdatedAt = now
		return tx.SaveJob(ctx, &j)
	})
	return j, began, err
}

// replayJobTx is what a replay job's chunk reads and writes: a replay's
// (replayWriteTx) and the replay cap's.
type replayJobTx interface {
	replayWriteTx
	ReplayCapTx
}

// idsChunk does the next ids of a job by ids; with canary > 0, that many
// at most (what is left of its canary; cut to bulkBytes like any chunk:
// the canary then takes more than one step).
func (b *Broker) idsChunk(ctx context.Context, tx replayJobTx, j *Job, now time.Time, touched func(string), canary int) (bool, error) {
	ids := j.Scope.IDs[min(j.Position, int64(len(j.Scope.IDs))):]
	if len(ids) == 0 {
		return true, nil
	}
	size := bulkChunk
	if j.Kind == JobDelete {
		size = deleteChunk
	}
	// One step, sized to the chunk's time (jobpace.go).
	clock := b.chunkClock(*j, size)
	n := clock.next()
	if canary > 0 {
		n = canary
	}
	chunk := ids[:min(n, len(ids))]
	keys, at, err := keysOfIDs(ctx, tx, chunk, j.Scope.Group)
	if err != nil {
		return false, err
	}
	if sc := j.Scope.Queues; sc != nil {
		if keys, at, err = keysInScope(ctx, tx, *sc, keys, at); err != nil {
			return false, err
		}
	}
	consumed, done := len(chunk), messagesIn(keys)
	if j.Kind == JobReplay {
		// Cut to the payloads one transaction may copy: the ids of the
		// messages left out come in the next chunk.
		if cut := withinBytes(keys); len(cut) < len(keys) {
			consumed, keys, done = at[len(cut)], cut, messagesIn(cut)
		}
		// At the replay cap: skipped (counted as such), or forced.
		if len(keys) > 0 {
			counts, err := replayCounts(ctx, tx, keys)
			if err != nil {
				return false, err
			}
			below, capped := splitAtCap(keys, counts)
			j.Capped += int64(messagesIn(capped))
			if !j.Scope.Force {
				keys, done = below, messagesIn(below)
			}
		}
	}
	if done > 0 {
		if err := b.applyJobKeys(ctx, tx, j, now, keys, touched); err != nil {
			return false, err
		}
	}
	clock.done(consumed)
	j.Position += int64(consumed)
	j.Done += int64(done)
	j.Skipped += int64(consumed - done)
	return j.Position >= int64(len(j.Scope.IDs)), nil
}

// filterChunk does the next chunk of a job by filter: the newest of what
// is left at or below its bound.
func (b *Broker) filterChunk(ctx context.Context, tx replayJobTx, j *Job, now time.Time, touched func(string)) (bool, error) {
	q := j.Scope.Filter
	if q == nil || q.Bound == nil {
		return false, fmt.Errorf("job #%d has neither ids nor a bound filter", j.ID)
	}
	f, ok, err := q.bulkFilter(ctx, tx)
	if err != nil || !ok {
		return true, err
	}
	if f, ok = within(f, *q.Bound); !ok {
		return true, nil
	}
	size := bulkChunk
	if j.Kind == JobDelete {
		size = deleteChunk
	}
	if j.Kind == JobReplay && !j.Scope.Force {
		// What is at the replay cap is left where it is (and counted as
		// the job ends): the chunks take the rest.
		f.Cap = CapBelow
	}
	// Steps of set-based statements, each the newest of what is left
	// (the steps before removed theirs), until the chunk's rows or time
	// are spent (jobpace.go).
	// The chunk's payloads add up to bulkBytes at most (a step cut short
	// by them ends it), and a step that finds fewer rows than it asked
	// for ends it too: the next chunk finds none, and ends the job.
	clock := b.chunkClock(*j, size)
	var copied int64
	for n := clock.next(); n > 0; n = clock.next() {
		keys, err := tx.DeadLetterKeys(ctx, f, n)
		if err != nil || len(keys) == 0 {
			return true, err
		}
		bytes, short, err := b.replayFilterKeys(ctx, tx, j, now, keys, touched, bulkBytes-copied)
		if err != nil {
			return false, err
		}
		clock.done(len(keys))
		if copied += bytes; short || len(keys) < n {
			break
		}
	}
	return false, nil
}

// replayFilterKeys replays or deletes keys (of a job by filter, read
// without their messages) and counts them done; a replay takes every
// group's dead letters of the messages with them (to every group), cut
// to maxBytes of payloads when maxBytes > 0 (never less than the first
// message). It returns the payload bytes a replay copied (when cut), and
// whether the cut left some of keys out.
func (b *Broker) replayFilterKeys(ctx context.Context, tx replayJobTx, j *Job, now time.Time, keys []DeadLetterKey, touched func(string), maxBytes int64) (bytes int64, short bool, err error) {
	if j.Kind == JobReplay {
		if j.byMessages() {
			// Every group's dead letters of the messages go with them, the
			// messages in the order listed, as many as the payloads one
			// transaction may copy (the rest still match: the next chunk
			// takes them).
			if keys, err = allGroups(ctx, tx, keys); err != nil {
				return 0, false, err
			}
		} else if keys, err = withSizes(ctx, tx, keys); err != nil {
			return 0, false, err
		}
		if maxBytes > 0 {
			n := len(keys)
			keys, bytes = withinBytesOf(keys, maxBytes)
			short = len(keys) < n
		}
		if j.Scope.Force {
			counts, err := replayCounts(ctx, tx, keys)
			if err != nil {
				return 0, false, err
			}
			_, capped := splitAtCap(keys, counts)
			if j.byMessages() {
				j.Capped += int64(messagesIn(capped))
			} else {
				j.Capped += int64(len(capped))
			}
		}
	}
	if len(keys) == 0 {
		return bytes, short, nil
	}
	if err := b.applyJobKeys(ctx, tx, j, now, keys, touched); err != nil {
		return 0, false, err
	}
	if j.byMessages() {
		j.Done += int64(messagesIn(keys))
	} else {
		j.Done += int64(len(keys))
	}
	return bytes, short, nil
}

// withSizes gives keys (read without their messages) their messages'
// times and payload sizes, in the same order.
func withSizes(ctx context.Context, tx DeadLetterTx, keys []DeadLetterKey) ([]DeadLetterKey, error) {
	var seqs []int64
	for _, k := range keys {
		seqs = append(seqs, k.Seq)
	}
	all, err := tx.DeadLetterKeysOf(ctx, seqs)
	if err != nil {
		return nil, fmt.Errorf("dead letters of messages: %w", err)
	}
	byID := make(map[int64]DeadLetterKey, len(all))
	for _, k := range all {
		byID[k.ID] = k
	}
	out := keys[:0:0]
	for _, k := range keys {
		if full, ok := byID[k.ID]; ok {
			out = append(out, full)
		}
	}
	return out, nil
}

// restoreChunk restores the next of the dead letters a delete job removed.
func (b *Broker) restoreChunk(ctx context.Context, tx restoreTx, j *Job, now time.Time, touched func(string)) (bool, error) {
	clock := b.chunkClock(*j, deleteChunk) // one step, sized to the chunk's time
	rs, err := tx.Restorable(ctx, 0, 0, j.UndoOf, now, clock.next())
	if err != nil || len(rs) == 0 {
		return true, err
	}
	queues, err := restoreRemoved(ctx, tx, now, rs, j.Actor)
	if err != nil {
		return false, err
	}
	clock.done(len(rs))
	for _, q := range queues {
		touched(q)
	}
	j.Done += int64(len(rs))
	return false, nil
}

// applyJobKeys replays or deletes keys for j.
func (b *Broker) applyJobKeys(ctx context.Context, tx replayWriteTx, j *Job, now time.Time, keys []DeadLetterKey, touched func(string)) error {
	var err error
	if j.Kind == JobReplay {
		var copies []Copy
		copies, err = replayKeys(ctx, tx, now, keys, replaySpec{by: ReplayBy{Actor: j.Actor, JobID: j.ID}, mode: j.Scope.Mode,
			dest: newDestinations(j.Scope.Destination, now, touched)})
		if err != nil {
			return err
		}
		for _, c := range copies {
			if !c.Inserted {
				j.Duplicates++ // there already: nothing new made
			}
		}
		if j.Canary != nil && j.Canary.State == CanaryDrawn {
			if err := recordCanary(ctx, tx, j, keys, copies); err != nil {
				return err
			}
		}
	} else {
		_, err = removeKeys(ctx, tx, keys, Stats{Deleted: 1}, b.removal(now, j.Actor, j.ID), now)
	}
	if err != nil {
		return err
	}
	_, err = messagesPerQueue(ctx, tx, keys, touched)
	return err
}

// Auto-pause defaults: a replay job pauses itself when more than
// DefaultPausePercent of the last DefaultPauseWindow copies settled
// failed again (queue options replayPausePercent, replayPauseWindow).
const (
	DefaultPausePercent = 20
	DefaultPauseWindow  = 50
	MaxPauseWindow      = 64 // the window is kept as bits of a uint64
)

// settleCopy counts how a replayed copy ended in a group that had
// dead-lettered the original (the only place where it says whether the
// fix worked): in the copy's outcome, and in its job's, which pauses
// itself when too many of its copies fail again. It reports whether the
// outcome was to be counted.
//
// A copy of a job whose canary is settling nudges the job's runner
// (jobNews), so that the canary is looked at once its copies settle, not
// at its deadline only; the canary, not the auto-pause window, judges
// those copies. A job that pauses itself is told (raise, EventJobPaused).
func settleCopy(ctx context.Context, tx auditJobReplayTx, m Message, groupID int64, ok bool, now time.Time, touched func(string), raise func(Event) error) (bool, error) {
	if !IsReplayTransaction(m.TransactionID) {
		return false, nil
	}
	counted, jobID, errorGroup, err := tx.TakeReplayOutcome(ctx, m.Seq, groupID, ok, now)
	if err != nil || !counted {
		return counted, err
	}
	if err := settleInErrorGroup(ctx, tx, errorGroup, ok, now, raise); err != nil {
		return counted, fmt.Errorf("error group: %w", err)
	}
	if jobID == 0 {
		return counted, nil
	}
	if err := tx.SettleJobCopy(ctx, jobID, groupID, ok); err != nil {
		return counted, fmt.Errorf("job outcome: %w", err)
	}
	j, err := tx.Job(ctx, jobID)
	if err == nil && j.State == JobRunning && j.canaryActive() {
		touched(jobNews)
		return counted, nil
	}
	if isNotFound(err) || (err == nil && (j.Kind != JobReplay || j.State != JobRunning || j.PausePercent <= 0)) {
		return counted, nil // only a running job pauses itself
	}
	if err != nil {
		return counted, err
	}
	window := min(max(j.PauseWindow, 1), MaxPauseWindow)
	j.Recent <<= 1
	if !ok {
		j.Recent |= 1
	}
	j.Recent &= 1<<window - 1
	j.RecentN = min(j.RecentN+1, window)
	j.UpdatedAt = now
	failed := bits.OnesCount64(j.Recent)
	if failed*100 > j.PausePercent*window {
		j.State = JobPaused
		j.Reason = fmt.Sprintf("paused itself: %d of the last %d copies settled failed again (more than %d %%)", failed, j.RecentN, j.PausePercent)
		if fp, n, err := commonFailure(ctx, tx, jobID, failed); err != nil {
			return counted, err
		} else if n > 0 {
			j.Reason += fmt.Sprintf("; %d of them share the error %q", n, truncate(fp, 120))
		}
		touched(jobNews)
		if err := tx.InsertAudit(ctx, &AuditEntry{At: now, Actor: BrokerActor, Action: AuditJobPause, Queue: j.Queue, Count: int(j.Done), Broker: true,
			Detail: fmt.Sprintf("job #%d %s", j.ID, j.Reason), JobID: j.ID}); err != nil {
			return counted, err
		}
		if err := raise(Event{Kind: EventJobPaused, Queue: j.Queue, Detail: j.Reason, At: now, JobID: j.ID}); err != nil {
			return counted, err
		}
	}
	return counted, tx.SaveJob(ctx, &j)
}

// commonFailure is the error group (fingerprint) most of the job's last
// n failed copies (those in its window) share, and how many do.
func commonFailure(ctx context.Context, tx JobTx, jobID int64, window int) (string, int, error) {
	fs, err := tx.JobFailures(ctx, jobID, window)
	if err != nil {
		return "", 0, fmt.Errorf("job failures: %w", err)
	}
	counts := map[string]int{}
	best, n := "", 0
	for _, f := range fs {
		if !f.DeadLetter {
			continue
		}
		counts[f.Fingerprint]++
		if c := counts[f.Fingerprint]; c > n || (c == n && f.Fingerprint < best) {
			best, n = f.Fingerprint, c
		}
	}
	return best, n, nil
}

// canaryLimitWords says when a canary pauses its job: "any fails again",
// "more than 2 fail again".
func canaryLimitWords(maxFailed int) string {
	if maxFailed == 0 {
		return "any fails again"
	}
	return fmt.Sprintf("more than %d fail again", maxFailed)
}

// keysInScope keeps the keys (and their places at) of the dead letters
// of the queues sc allows: a job by ids made by a principal with a queue
// scope skips the others, as if absent.
func keysInScope(ctx context.Context, tx QueueTx, sc QueueScope, keys []DeadLetterKey, at []int) ([]DeadLetterKey, []int, error) {
	ids, all, err := scopeQueueIDs(ctx, tx, sc)
	if err != nil || all {
		return keys, at, err
	}
	allowed := make(map[int64]bool, len(ids))
	for _, id := range ids {
		allowed[id] = true
	}
	var k2 []DeadLetterKey
	var at2 []int
	for i, k := range keys {
		if allowed[k.QueueID] {
			k2, at2 = append(k2, k), append(at2, at[i])
		}
	}
	return k2, at2, nil
}
