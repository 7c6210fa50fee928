package sqlcore

import (
	"context"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Jobs (migration 0018): bulk actions kept in the database, with their
// outcomes per consumer group.

const jobCols = `id, kind, state, actor, created_at, updated_at, finished_at, queue, scope, description, rate,
	planned, done, skipped, failed, arrived_since, position, reason, pause_percent, pause_window, recent, recent_n, undo_of, undone_by, capped, canary, duplicates`

func scanJob(s interface{ Scan(...any) error }) (broker.Job, error) {
	var j broker.Job
	var created, updated, finished, recent int64
	var scope, canary string
	err := s.Scan(&j.ID, &j.Kind, &j.State, &j.Actor, &created, &updated, &finished, &j.Queue, &scope, &j.Description, &j.Rate,
		&j.Planned, &j.Done, &j.Skipped, &j.Failed, &j.ArrivedSince, &j.Position, &j.Reason, &j.PausePercent, &j.PauseWindow, &recent, &j.RecentN, &j.UndoOf, &j.UndoneBy, &j.Capped,
		&canary, &j.Duplicates)
	if err != nil {
		return j, err
	}
	j.CreatedAt, j.UpdatedAt, j.Recent = FromMS(created), FromMS(updated), uint64(recent)
	if finished != 0 {
		j.FinishedAt = FromMS(finished)
	}
	if j.Scope, err = broker.ParseJobScope(scope); err != nil {
		return j, err
	}
	j.Canary, err = broker.ParseJobCanary(canary)
	return j, err
}

// InsertJob writes a row of jobs (AUTOINCREMENT: ids only grow).
func (t *Tx) InsertJob(ctx context.Context, j *broker.Job) error {
	var err error
	_, j.ID, err = t.Insert(ctx, "id", `INSERT INTO jobs (kind, state, actor, created_at, updated_at, queue, scope, description, rate, planned, pause_percent, pause_window, undo_of, canary)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		j.Kind, j.State, j.Actor, MS(j.CreatedAt), MS(j.UpdatedAt), j.Queue, j.Scope.ScopeJSON(), j.Description, j.Rate, j.Planned, j.PausePercent, j.PauseWindow, j.UndoOf,
		broker.JobCanaryJSON(j.Canary))
	return err
}

// Job reads a job by its primary key.
func (t *Tx) Job(ctx context.Context, id int64) (broker.Job, error) {
	j, err := scanJob(t.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
	return j, notFound(err, "job")
}

// The fragments of Jobs' statement (JobsStmt).
const (
	jobsSelect    Frag = `SELECT ` + jobCols + ` FROM jobs`
	jobsOfState   Frag = `state = ?`
	jobsOfQueue   Frag = `queue = ?`
	jobsOfKind    Frag = `kind = ?`
	idBefore      Frag = `id < ?`
	idNewestFirst Frag = ` ORDER BY id DESC LIMIT ?`
	fragOffset    Frag = ` OFFSET ?`
)

// JobsStmt is Jobs' statement: newest first by the primary key; a state
// filter goes by jobs_state.
func JobsStmt(f broker.JobFilter, p broker.Page) Stmt {
	var s Stmt
	s.Add(jobsSelect)
	if f.State != "" {
		s.Cond(jobsOfState, f.State)
	}
	if f.Queue != "" {
		s.Cond(jobsOfQueue, f.Queue)
	}
	if f.Kind != "" {
		s.Cond(jobsOfKind, f.Kind)
	}
	if p.After != nil {
		s.Cond(idBefore, p.After.ID)
	}
	s.Add(idNewestFirst, p.Limit)
	return s
}

// Jobs reads JobsStmt. The table holds one row per person's bulk action.
func (t *Tx) Jobs(ctx context.Context, f broker.JobFilter, p broker.Page) ([]broker.Job, error) {
	s := JobsStmt(f, p)
	rows, err := t.QueryStmt(ctx, &s)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// SaveJob writes what changes as a job runs, by its primary key.
func (t *Tx) SaveJob(ctx context.Context, j *broker.Job) error {
	var finished int64
	if !j.FinishedAt.IsZero() {
		finished = MS(j.FinishedAt)
	}
	res, err := t.Exec(ctx, `UPDATE jobs SET state = ?, updated_at = ?, finished_at = ?, planned = ?, done = ?, skipped = ?, failed = ?, arrived_since = ?,
		position = ?, reason = ?, recent = ?, recent_n = ?, undone_by = ?, capped = ?, canary = ?, duplicates = ? WHERE id = ?`,
		j.State, MS(j.UpdatedAt), finished, j.Planned, j.Done, j.Skipped, j.Failed, j.ArrivedSince, j.Position, j.Reason, int64(j.Recent), j.RecentN, j.UndoneBy, j.Capped,
		broker.JobCanaryJSON(j.Canary), j.Duplicates, j.ID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return notFound(orNoRows(err), "job")
	}
	return nil
}

// orNoRows is err, or errNoRows when there is none: an UPDATE that
// touched no row found nothing.
func orNoRows(err error) error {
	if err != nil {
		return err
	}
	return errNoRows
}

// JobOutcomes reads job_outcomes by its key prefix, joined to the
// groups' names.
func (t *Tx) JobOutcomes(ctx context.Context, jobID int64) ([]broker.JobOutcome, error) {
	rows, err := t.Query(ctx, `SELECT o.group_id, g.name, o.replayed, o.succeeded, o.failed, o.expired
		FROM job_outcomes o JOIN groups g ON g.id = o.group_id WHERE o.job_id = ? ORDER BY g.name`, jobID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.JobOutcome
	for rows.Next() {
		var o broker.JobOutcome
		if err := rows.Scan(&o.GroupID, &o.Group, &o.Replayed, &o.Succeeded, &o.Failed, &o.Expired); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// JobFailuresQuery is JobFailures' query.
// A copy retention removed is still listed: it was pushed when it was
// replayed (replays.at), in its dead letter's partition (migration 0020).
const JobFailuresQuery = `SELECT o.copy_seq, COALESCE(m.created_at, r.at, 0), COALESCE(q.name, ''), o.group_id, g.name, o.settled_at,
			d.id IS NOT NULL, COALESCE(d.fingerprint, ''), COALESCE(d.error, '')
		FROM replay_outcomes o
		LEFT JOIN messages m ON m.seq = o.copy_seq
		LEFT JOIN replays r ON r.copy_seq = o.copy_seq
		JOIN groups g ON g.id = o.group_id
		LEFT JOIN dead_letters d ON d.seq = o.copy_seq AND d.group_id = o.group_id
		LEFT JOIN partitions p ON p.id = COALESCE(m.partition_id, d.partition_id)
		LEFT JOIN queues q ON q.id = p.queue_id
		WHERE o.job_id = ? AND o.job_id > 0 AND o.outcome = 2
		ORDER BY o.copy_seq DESC LIMIT ?`

// JobFailures reads the job's failed copies by replay_outcomes_job, the
// newest copies first (a copy settles once per group; copies of a job
// are pushed in order, so newest seq is close to newest settled), with
// the copy's message for its id and its dead letter when it is one.
func (t *Tx) JobFailures(ctx context.Context, jobID int64, limit int) ([]broker.JobFailure, error) {
	rows, err := t.Query(ctx, JobFailuresQuery, jobID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.JobFailure
	for rows.Next() {
		var f broker.JobFailure
		var created, settled int64
		if err := rows.Scan(&f.CopySeq, &created, &f.Queue, &f.GroupID, &f.Group, &settled, &f.DeadLetter, &f.Fingerprint, &f.Error); err != nil {
			return nil, err
		}
		f.CopyID, f.SettledAt = broker.MessageID(FromMS(created), f.CopySeq), FromMS(settled)
		out = append(out, f)
	}
	return out, rows.Err()
}

// SettleJobCopy counts into the job's row of job_outcomes for the group
// (made by ExpectReplayOutcomes when the copy was pushed).
func (t *Tx) SettleJobCopy(ctx context.Context, jobID, groupID int64, ok bool) error {
	col := "failed"
	if ok {
		col = "succeeded"
	}
	_, err := t.Exec(ctx, `UPDATE job_outcomes SET `+col+` = `+col+` + 1 WHERE job_id = ? AND group_id = ?`, jobID, groupID)
	return err
}

// CopyOutcomes reads replay_outcomes by its primary key's prefix (the
// copies' seqs), with each group's name and, for a copy that failed
// again and is the group's dead letter now, its error.
func (t *Tx) CopyOutcomes(ctx context.Context, copySeqs []int64) ([]broker.CanaryOutcome, error) {
	if len(copySeqs) == 0 {
		return nil, nil
	}
	rows, err := t.Query(ctx, `SELECT o.copy_seq, o.group_id, g.name, o.outcome, o.settled_at, d.id IS NOT NULL, COALESCE(d.error, '')
		FROM replay_outcomes o
		JOIN groups g ON g.id = o.group_id
		LEFT JOIN dead_letters d ON d.seq = o.copy_seq AND d.group_id = o.group_id
		WHERE o.copy_seq IN (SELECT value FROM json_each(?))
		ORDER BY o.copy_seq, g.name`, IntsJSON(copySeqs))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.CanaryOutcome
	for rows.Next() {
		var o broker.CanaryOutcome
		var settled int64
		if err := rows.Scan(&o.CopySeq, &o.GroupID, &o.Group, &o.Outcome, &settled, &o.DeadLetter, &o.Error); err != nil {
			return nil, err
		}
		if settled != 0 {
			o.SettledAt = FromMS(settled)
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// SettlingCanaries reads jobs.canary of the running replay jobs whose
// canary is settling, by jobs_state. The state is matched in the JSON as
// stored ("state":"settling" is the canary's own key: a string inside it
// has its quotes escaped, so no copy's text can match), then checked
// again once decoded.
func (t *Tx) SettlingCanaries(ctx context.Context) ([]broker.JobCanary, error) {
	rows, err := t.Query(ctx, `SELECT canary FROM jobs
		WHERE state = ? AND kind = ? AND canary LIKE '%"state":"settling"%'
		ORDER BY id`, broker.JobRunning, broker.JobReplay)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []broker.JobCanary
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return nil, err
		}
		c, err := broker.ParseJobCanary(text)
		if err != nil {
			return nil, err
		}
		if c != nil && c.State == broker.CanarySettling {
			out = append(out, *c)
		}
	}
	return out, rows.Err()
}
