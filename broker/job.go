package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Job kinds.
const (
	JobReplay  = "replay"
	JobDelete  = "delete"
	JobRestore = "restore" // undoes a delete job, within the restore window
)

// Job states. Running jobs are worked on (and resumed at start); paused
// ones wait for a person; cancelled, done and failed ones are finished.
const (
	JobRunning   = "running"
	JobPaused    = "paused"
	JobCancelled = "cancelled"
	JobDone      = "done"
	JobFailed    = "failed"
)

// Replay modes (SPEC 4).
const (
	// ReplayEveryGroup pushes a copy every group that reads the partition
	// sees; the message's dead letters in every group go with it. The
	// default.
	ReplayEveryGroup = ""
	// ReplayOwnGroup delivers the copy only to the group whose dead
	// letter it was; the other groups' cursors pass it by, and their own
	// dead letters of the message stay.
	ReplayOwnGroup = "own"
)

// Audit actions of jobs. A job is one entry of its actor (the replay or
// delete, with its JobID); pausing, resuming and cancelling one are
// entries of their own, and a job that pauses itself is an entry of the
// broker's stream.
const (
	AuditJobPause   = "job_pause"
	AuditJobResume  = "job_resume"
	AuditJobCancel  = "job_cancel"
	AuditJobFail    = "job_fail" // the broker's: a job whose chunks kept failing
	AuditRestore    = "restore"
	AuditEditReplay = "edit_replay"
)

// Job paces (SPEC 4): how long a chunk may hold the database's writer.
const (
	// PaceGentle, the default, ends a chunk after a few milliseconds
	// (gentleChunkBudget), so that the pushes and acks waiting behind it
	// get in between chunks within about that time.
	PaceGentle = ""
	// PaceFull bounds a chunk by its rows (fullChunk) rather than by
	// time (fullChunkBudget is only a safety): the job runs flat out, and
	// the writes waiting behind a chunk wait as long as its rows take.
	PaceFull = "full"
)

// BrokerActor is the actor of what the broker does by itself.
const BrokerActor = "lazarus"

// JobScope is what a job acts on, frozen when it starts: the ids it was
// given, or a filter and the bound its confirmation counted up to.
type JobScope struct {
	IDs []string `json:"ids,omitempty"`
	// Group, with IDs on a delete: only that group's dead letters.
	Group string `json:"group,omitempty"`
	// Filter, with Bound set: the dead letters at or below it.
	Filter *DLQQuery `json:"filter,omitempty"`
	// Mode of a replay: ReplayEveryGroup or ReplayOwnGroup.
	Mode string `json:"mode,omitempty"`
	// Force, on a replay: messages at their queue's replay cap
	// (maxReplays) are replayed too, and counted in Capped.
	Force bool `json:"force,omitempty"`
	// Destination of a replay: where its copies go instead of each
	// message's own partition (kept with the job, so that a job resumed
	// after a restart keeps it).
	Destination *Destination `json:"destination,omitempty"`
	// Queues, on a job by ids, is the scope of the request that made it
	// (nil: every queue): the dead letters of other queues are as if
	// absent, skipped. A job by filter keeps it in its Filter.
	Queues *QueueScope `json:"queues,omitempty"`
	// Pace is how hard the job's chunks press on the writer: PaceGentle
	// (the default) or PaceFull.
	Pace string `json:"pace,omitempty"`
}

// Job is a bulk replay, delete or restore, kept in the database and run in
// the background (RunJobs), a chunk a transaction.
type Job struct {
	ID          int64
	Kind        string
	State       string
	Actor       string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	FinishedAt  time.Time // zero while running or paused
	Queue       string    // "" for every queue
	Scope       JobScope
	Description string // the scope in words
	Rate        int    // messages (a delete: dead letters) a second at most; 0 no limit
	// Planned is what the confirmation counted: messages for a replay to
	// every group, dead letters for a replay to their own groups and for
	// a delete by filter, ids for a job by ids, dead letters to restore.
	Planned int64
	Done    int64
	Skipped int64 // gone already (replayed or deleted since it was counted)
	Failed  int64 // left untouched because the job failed
	// Capped, of a replay: what was at its queue's replay cap
	// (maxReplays), in Planned's unit: skipped (and counted in Skipped
	// too), or, with Scope.Force, replayed past it.
	Capped int64
	// ArrivedSince counts the dead letters of the filter filed after its
	// bound (not touched), once the job is done; -1 until then.
	ArrivedSince int64
	Position     int64  // a job by ids: how many ids it has taken
	Reason       string // why it paused, failed or was cancelled
	// Auto-pause: the job pauses itself when more than PausePercent of
	// the last PauseWindow copies settled failed again (0: never).
	PausePercent int
	PauseWindow  int
	Recent       uint64 // the last settled copies, a bit each (1: failed again), newest lowest
	RecentN      int
	UndoOf       int64 // a restore: the delete job it undoes
	UndoneBy     int64 // a delete: the restore job that undid it
	// Canary, of a replay: its first step (nil: none). Stored as JSON.
	Canary *JobCanary
	// Duplicates, of a replay: copies that were there already (counted in
	// Done: nothing new was made for them).
	Duplicates int64
}

// Finished reports whether the job will do nothing more.
func (j Job) Finished() bool {
	return j.State == JobCancelled || j.State == JobDone || j.State == JobFailed
}

// Left is how much of what was planned is still to do.
func (j Job) Left() int64 { return max(j.Planned-j.Done-j.Skipped-j.Failed, 0) }

// scopeJSON is the scope as stored.
func (s JobScope) scopeJSON() string {
	b, _ := json.Marshal(s) // strings, times and ints: cannot fail
	return string(b)
}

// ParseJobScope reads a scope as stored (for stores).
func ParseJobScope(s string) (JobScope, error) {
	var sc JobScope
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		return sc, fmt.Errorf("job scope: %w", err)
	}
	return sc, nil
}

// ScopeJSON is the scope as a store keeps it.
func (s JobScope) ScopeJSON() string { return s.scopeJSON() }

// JobOutcome is a replay job's outcome in one consumer group, kept as its
// copies settle: how many copies the group is to settle, and how many it
// completed or failed again (dead-lettered or dropped), or lost to
// retentionSeconds before it settled them (expired).
type JobOutcome struct {
	GroupID   int64
	Group     string
	Replayed  int64
	Succeeded int64
	Failed    int64
	Expired   int64
}

// Pending is how many copies the group has not settled yet.
func (o JobOutcome) Pending() int64 { return max(o.Replayed-o.Succeeded-o.Failed-o.Expired, 0) }

// JobFailure is a replayed copy that failed again in a group: the copy's
// message id, and its dead letter when it is still one.
type JobFailure struct {
	CopySeq     int64
	CopyID      string // the copy's message id
	Queue       string
	GroupID     int64
	Group       string
	SettledAt   time.Time
	DeadLetter  bool   // still a dead letter (not dropped, replayed or deleted since)
	Fingerprint string // its error group, when DeadLetter
	Error       string // its error text, when DeadLetter (cut to a line by the pages)
}

// JobFilter selects jobs.
type JobFilter struct {
	State string
	Queue string
	Kind  string
	// Scope is the queues the viewer may see: jobs of other queues, and
	// jobs over every queue (Queue ""), are as if absent unless it is
	// every queue (the zero scope). The broker filters (stores ignore it).
	Scope QueueScope
}

// JobInScope reports whether a viewer limited to sc sees job j: a job of
// one queue when sc allows it, a job over every queue only when sc is
// every queue.
func JobInScope(sc QueueScope, j Job) bool {
	return sc.All() || (j.Queue != "" && sc.Allows(j.Queue))
}

// JobTx is what jobs need from storage.
type JobTx interface {
	// InsertJob stores j (its scope as JSON) and sets its ID. Job ids
	// only grow, and are never given twice (even once the newest job is
	// swept). It writes jobs only.
	InsertJob(ctx context.Context, j *Job) error
	// Job reads one job, by the primary key (ErrNotFound: none, or
	// swept by the history's retention).
	Job(ctx context.Context, id int64) (Job, error)
	// Jobs lists the jobs f selects (by state, queue and kind) newest
	// first, at most p.Limit, older than p.After.ID when set (p.Offset is
	// not read). It reads jobs by its primary key (by jobs_state when a
	// state is given); none: empty.
	Jobs(ctx context.Context, f JobFilter, p Page) ([]Job, error)
	// SaveJob writes j's state, counters, position, reason, times,
	// auto-pause window and undo links (not its kind, actor or scope), by
	// the primary key; ErrNotFound when there is no such job (swept). It
	// locks nothing more than the write it is part of (one not marked
	// Concurrent, which runs alone).
	SaveJob(ctx context.Context, j *Job) error
	// JobOutcomes returns a replay job's outcomes per group, by group
	// name (none: empty). It reads job_outcomes by the job, and groups.
	JobOutcomes(ctx context.Context, jobID int64) ([]JobOutcome, error)
	// JobFailures returns up to limit copies of the job that failed
	// again, newest copy first (by copy seq, not by when each settled:
	// the copies of a job are pushed in order, so the two are close),
	// each with its dead letter's error when it is still one. It reads
	// replay_outcomes by the job, and joins messages, replays, groups,
	// dead letters, partitions and queues; none: empty.
	JobFailures(ctx context.Context, jobID int64, limit int) ([]JobFailure, error)
	// SettleJobCopy counts a copy of the job settled in a group:
	// succeeded or failed again, into job_outcomes' row of the job and
	// group (made by ExpectReplayOutcomes; none, as after the job was
	// swept, is not an error: nothing is counted).
	SettleJobCopy(ctx context.Context, jobID, groupID int64, ok bool) error
	// CopyOutcomes reads the outcomes of the copies copySeqs in each
	// group whose dead letter they replaced (replay_outcomes by its
	// primary key's prefix), by copy seq then group name, each with the
	// group's name and, when the copy is that group's dead letter now,
	// its error; none: empty. A canary's settling reads it (at most
	// MaxCanaryCount copies).
	CopyOutcomes(ctx context.Context, copySeqs []int64) ([]CanaryOutcome, error)
	// SettlingCanaries reads the canaries (jobs.canary only, never the
	// scope) of the running replay jobs whose canary is settling, by job
	// id; none: empty. One statement by jobs_state: a held pop reads it
	// (canary_gate.go), and finds no row while no canary settles.
	SettlingCanaries(ctx context.Context) ([]JobCanary, error)
	// DrawDeadLetterKeys reads the keys (without their messages' times
	// and sizes, as DeadLetterKeys) of the dead letters at d.Ranks of
	// d.Filter's rows numbered newest failure first from 0, in rank
	// order: one statement that reads the filter's rows once (a walk of
	// its index) and locks nothing; a rank past the end names nothing.
	DrawDeadLetterKeys(ctx context.Context, d DrawKeys) ([]DeadLetterKey, error)
}
