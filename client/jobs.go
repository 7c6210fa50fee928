package client

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// Job states: a job is running or paused until it is done, cancelled or
// failed.
const (
	JobRunning   = "running"
	JobPaused    = "paused"
	JobDone      = "done"
	JobCancelled = "cancelled"
	JobFailed    = "failed"
)

// Job is a bulk replay, delete or restore and how far it got.
type Job struct {
	ID          int64     `json:"id"`
	URL         string    `json:"url"`
	Kind        string    `json:"kind"`
	State       string    `json:"state"`
	Reason      string    `json:"reason"`
	Actor       string    `json:"actor"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	FinishedAt  time.Time `json:"finishedAt"` // zero while running or paused
	Queue       *string   `json:"queue"`      // nil: every queue
	Description string    `json:"description"`
	Rate        int       `json:"rate"`
	Planned     int64     `json:"planned"`
	Done        int64     `json:"done"`
	Skipped     int64     `json:"skipped"`
	Failed      int64     `json:"failed"`
	Capped      int64     `json:"capped"`
	// ArrivedSince: dead letters of the filter filed after its bound,
	// not touched; nil until the job is done, or for a job by ids.
	ArrivedSince *int64 `json:"arrivedSince"`
	Scope        struct {
		IDs           int     `json:"ids"`
		ConsumerGroup string  `json:"consumerGroup"`
		Filter        *Filter `json:"filter"`
		Bound         *Bound  `json:"bound"`
		Mode          string  `json:"mode"`
		Force         bool    `json:"force"`
	} `json:"scope"`
	// Results, of a replay: moved, duplicate, gone.
	Results *struct {
		Moved     int64 `json:"moved"`
		Duplicate int64 `json:"duplicate"`
		Gone      int64 `json:"gone"`
	} `json:"results"`
}

// Finished says whether the job will do no more: done, cancelled or
// failed (a paused job may be resumed).
func (j Job) Finished() bool {
	return j.State == JobDone || j.State == JobCancelled || j.State == JobFailed
}

// JobAnswer is a job action's answer, and a bulk action's as it starts.
type JobAnswer struct {
	body
	Job Job `json:"job"`
}

// JobFilter selects jobs: State, Kind (replay, delete, restore), Queue;
// Limit (0: the server's 50) and After (a job id: the Next of the page
// before).
type JobFilter struct {
	State string
	Kind  string
	Queue string
	Limit int
	After string
}

// JobList is a page of jobs, newest first.
type JobList struct {
	body
	Jobs []Job  `json:"jobs"`
	Next string `json:"next"` // "" on the last page
}

// Jobs lists jobs, newest first.
func (c *Client) Jobs(ctx context.Context, f JobFilter) (*JobList, error) {
	q := params("state", f.State, "kind", f.Kind, "queue", f.Queue, "after", f.After)
	setNumber(q, "limit", f.Limit)
	var out JobList
	_, err := c.call(ctx, http.MethodGet, "/jobs", q, nil, &out)
	return &out, err
}

// JobOutcome is a replay job's outcome in one consumer group.
type JobOutcome struct {
	ConsumerGroup string `json:"consumerGroup"`
	Replayed      int64  `json:"replayed"`
	Succeeded     int64  `json:"succeeded"`
	Failed        int64  `json:"failed"`
	Pending       int64  `json:"pending"`
}

// JobDetail is GET /api/v1/jobs/:id: the job, a replay's outcomes per
// group, and the copies that failed again (in Raw).
type JobDetail struct {
	body
	Job      Job          `json:"job"`
	Outcomes []JobOutcome `json:"outcomes"`
}

// Job reads one job.
func (c *Client) Job(ctx context.Context, id int64) (*JobDetail, error) {
	var out JobDetail
	_, err := c.call(ctx, http.MethodGet, "/jobs/"+strconv.FormatInt(id, 10), nil, nil, &out)
	return &out, err
}

// PauseJob pauses a running job.
func (c *Client) PauseJob(ctx context.Context, id int64) (*JobAnswer, error) {
	return c.jobAction(ctx, id, "pause")
}

// ResumeJob resumes a paused job.
func (c *Client) ResumeJob(ctx context.Context, id int64) (*JobAnswer, error) {
	return c.jobAction(ctx, id, "resume")
}

// CancelJob cancels a running or paused job: what it did stays done.
func (c *Client) CancelJob(ctx context.Context, id int64) (*JobAnswer, error) {
	return c.jobAction(ctx, id, "cancel")
}

func (c *Client) jobAction(ctx context.Context, id int64, action string) (*JobAnswer, error) {
	var out JobAnswer
	_, err := c.call(ctx, http.MethodPost, "/jobs/"+strconv.FormatInt(id, 10)+"/"+action, nil, nil, &out)
	return &out, err
}

// WaitJob reads the job every interval until it is finished or paused,
// calling seen (when not nil) with each reading, and returns the last.
// A paused job is returned too: it waits for a person, who may resume or
// cancel it.
func (c *Client) WaitJob(ctx context.Context, id int64, every time.Duration, seen func(Job)) (*JobDetail, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		j, err := c.Job(ctx, id)
		if err != nil {
			return j, err
		}
		if seen != nil {
			seen(j.Job)
		}
		if j.Job.Finished() || j.Job.State == JobPaused {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-t.C:
		}
	}
}
