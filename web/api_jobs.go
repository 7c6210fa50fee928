package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// jobsAPIPageSize is the default page of GET /api/v1/jobs; at most
// jobsAPIMaxPage.
const (
	jobsAPIPageSize = 50
	jobsAPIMaxPage  = 500
)

// jobJSON is a job as the API writes it.
type jobJSON struct {
	ID          int64     `json:"id"`
	URL         string    `json:"url"` // its page on the dashboard
	Kind        string    `json:"kind"`
	State       string    `json:"state"`
	Reason      string    `json:"reason,omitempty"`
	Actor       string    `json:"actor"`
	CreatedAt   timestamp `json:"createdAt"`
	UpdatedAt   timestamp `json:"updatedAt"`
	FinishedAt  timestamp `json:"finishedAt"` // null while running or paused
	Queue       *string   `json:"queue"`      // null: every queue
	Scope       scopeJSON `json:"scope"`
	Description string    `json:"description"`
	Rate        int       `json:"rate"` // a second; 0 no limit
	Pace        string    `json:"pace"` // "gentle" or "full"
	Planned     int64     `json:"planned"`
	Done        int64     `json:"done"`
	Skipped     int64     `json:"skipped"`
	Failed      int64     `json:"failed"`
	// Capped, of a replay: how many were at their queue's replay cap
	// (maxReplays): skipped (in skipped too), or, forced, replayed.
	Capped int64 `json:"capped"`
	// ArrivedSince: dead letters of the filter filed after its bound,
	// not touched; null until the job is done, or for a job by ids.
	ArrivedSince *int64 `json:"arrivedSince"`
	UndoOf       *int64 `json:"undoOf,omitempty"`
	UndoneBy     *int64 `json:"undoneBy,omitempty"`
	// Canary, of a replay that began with one: its first step.
	Canary *canaryJSON `json:"canary,omitempty"`
	// Results, of a replay: the bulk form of a replay's verdict (moved,
	// duplicate, gone), in planned's unit.
	Results *resultsJSON `json:"results,omitempty"`
}

// canaryJSON is a replay job's canary: what was asked, its state
// (drawn, settling, passed, failed), until when it settles, its copies
// and, failed, why the job paused.
type canaryJSON struct {
	Count         int          `json:"count"`
	SettleSeconds int          `json:"settleSeconds"`
	MaxFailed     int          `json:"maxFailed"`
	State         string       `json:"state"`
	DrawnAt       timestamp    `json:"drawnAt"`
	Until         timestamp    `json:"until"` // null until replayed
	Failed        int          `json:"failed"`
	Copies        []canaryCopy `json:"copies"`
	Reason        *string      `json:"reason"`
}

// canaryCopy is a dead letter the canary replayed, and its copy's
// outcome in the dead letter's group (pending, succeeded, failed).
type canaryCopy struct {
	DeadLetterID  string  `json:"deadLetterId"`
	ConsumerGroup string  `json:"consumerGroup"`
	TransactionID string  `json:"transactionId"`
	Queue         string  `json:"queue"`
	Partition     string  `json:"partition"`
	Outcome       string  `json:"outcome"`
	Error         *string `json:"error"` // failed: its error, or why it counts as failed
}

// resultsJSON counts a replay job's work as a single replay's verdict:
// moved (a copy made), duplicate (the copy was there already), gone (no
// dead letter any more: replayed, deleted or expired since it was
// counted, or skipped at the replay cap).
type resultsJSON struct {
	Moved     int64 `json:"moved"`
	Duplicate int64 `json:"duplicate"`
	Gone      int64 `json:"gone"`
}

func toCanaryJSON(c *broker.JobCanary) *canaryJSON {
	out := &canaryJSON{Count: c.Count, SettleSeconds: c.SettleSeconds, MaxFailed: c.MaxFailed, State: c.State, DrawnAt: timestamp(c.DrawnAt),
		Until: timestamp(c.Until), Failed: c.Failed(), Copies: make([]canaryCopy, 0, len(c.Copies)), Reason: optional(c.Reason)}
	for _, cp := range c.Copies {
		out.Copies = append(out.Copies, canaryCopy{DeadLetterID: cp.DeadLetterID, ConsumerGroup: cp.Group, TransactionID: cp.TransactionID,
			Queue: cp.Queue, Partition: cp.Partition, Outcome: cp.Outcome, Error: optional(cp.Error)})
	}
	return out
}

// paceGentle names the default pace (broker.PaceGentle, "") on the API.
const paceGentle = "gentle"

// paceName is a job's pace as the API names it.
func paceName(p string) string {
	if p == broker.PaceGentle {
		return paceGentle
	}
	return p
}

// scopeJSON is what a job acts on, frozen when it started.
type scopeJSON struct {
	IDs           int         `json:"ids,omitempty"` // how many ids, for a job by ids
	ConsumerGroup string      `json:"consumerGroup,omitempty"`
	Filter        *bulkFilter `json:"filter,omitempty"`
	Bound         *bulkBound  `json:"bound,omitempty"`
	Mode          string      `json:"mode,omitempty"`  // a replay's: every or own
	Force         bool        `json:"force,omitempty"` // a replay's: past the replay cap
	// Destination, a replay's: where its copies go instead of each
	// message's own partition.
	Destination *destinationJSON `json:"destination,omitempty"`
}

func toJobJSON(j broker.Job) jobJSON {
	out := jobJSON{ID: j.ID, URL: jobURL(j.ID), Kind: j.Kind, State: j.State, Reason: j.Reason, Actor: j.Actor, CreatedAt: timestamp(j.CreatedAt),
		UpdatedAt: timestamp(j.UpdatedAt), FinishedAt: timestamp(j.FinishedAt), Queue: optional(j.Queue), Description: j.Description, Rate: j.Rate, Pace: paceName(j.Scope.Pace),
		Planned: j.Planned, Done: j.Done, Skipped: j.Skipped, Failed: j.Failed, Capped: j.Capped}
	if j.ArrivedSince >= 0 && j.Scope.Filter != nil {
		n := j.ArrivedSince
		out.ArrivedSince = &n
	}
	if j.UndoOf != 0 {
		out.UndoOf = &j.UndoOf
	}
	if j.UndoneBy != 0 {
		out.UndoneBy = &j.UndoneBy
	}
	sc := j.Scope
	out.Scope = scopeJSON{IDs: len(sc.IDs), ConsumerGroup: sc.Group, Force: sc.Force}
	if d := sc.Destination; d != nil {
		out.Scope.Destination = &destinationJSON{Queue: d.Queue, Partition: d.Partition}
	}
	if j.Kind == broker.JobReplay {
		out.Results = &resultsJSON{Moved: max(j.Done-j.Duplicates, 0), Duplicate: j.Duplicates, Gone: j.Skipped}
		if j.Canary != nil {
			out.Canary = toCanaryJSON(j.Canary)
		}
		out.Scope.Mode = "every"
		if sc.Mode == broker.ReplayOwnGroup {
			out.Scope.Mode = "own"
		}
	}
	if q := sc.Filter; q != nil {
		f := &bulkFilter{Queue: q.Queue, ConsumerGroup: q.Group, Partition: q.Partition, Error: q.ErrorContains, TransactionID: q.TransactionID,
			Fingerprint: q.Fingerprint, All: q.AllQueues, Q: q.Text, Field: q.Fields, ConsumerVersion: q.ConsumerVersion}
		if !q.From.IsZero() {
			f.From = q.From.UTC().Format(timeFormat)
		}
		if !q.To.IsZero() {
			f.To = q.To.UTC().Format(timeFormat)
		}
		out.Scope.Filter = f
		if q.Bound != nil {
			out.Scope.Bound = &bulkBound{FailedAt: timestamp(q.Bound.FailedAt), ID: q.Bound.ID}
		}
	}
	return out
}

// outcomeJSON is a replay job's outcome in a consumer group.
type outcomeJSON struct {
	ConsumerGroup string `json:"consumerGroup"`
	Replayed      int64  `json:"replayed"`
	Succeeded     int64  `json:"succeeded"`
	Failed        int64  `json:"failed"`
	Pending       int64  `json:"pending"`
}

// failureJSON is a replayed copy that failed again.
type failureJSON struct {
	ID            string    `json:"id"` // the copy's message id
	Queue         string    `json:"queue"`
	ConsumerGroup string    `json:"consumerGroup"`
	SettledAt     timestamp `json:"settledAt"`
	// DeadLetter: it is still a dead letter (GET /api/v1/dlq/:id), of
	// the error group fingerprint, with errorMessage.
	DeadLetter   bool    `json:"deadLetter"`
	Fingerprint  *string `json:"fingerprint"`
	ErrorMessage *string `json:"errorMessage"`
}

// jobDetailJSON is GET /api/v1/jobs/:id.
type jobDetailJSON struct {
	Job      jobJSON       `json:"job"`
	Outcomes []outcomeJSON `json:"outcomes"`
	Failures []failureJSON `json:"failures"`
}

// jobAnswer is a job action's answer.
type jobAnswer struct {
	Job jobJSON `json:"job"`
}

// listJobs is GET /api/v1/jobs: newest first; state, kind and queue
// filter; limit and after (a job id) page.
func (s *Server) listJobs(c echo.Context) error {
	limit, err := queryInt(c, "limit", jobsAPIPageSize)
	if err != nil {
		return err
	}
	if limit < 1 || limit > jobsAPIMaxPage {
		return badRequest("limit must be between 1 and %d", jobsAPIMaxPage)
	}
	f, p, err := readJobFilter(c, limit)
	if err != nil {
		return err
	}
	jobs, err := s.broker.Jobs(c.Request().Context(), f, p)
	if err != nil {
		return err
	}
	out := struct {
		Jobs []jobJSON `json:"jobs"`
		// Next is the after= of the next page; null on the last.
		Next *string `json:"next"`
	}{Jobs: make([]jobJSON, 0, len(jobs))}
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, toJobJSON(j))
	}
	if len(jobs) == limit {
		next := strconv.FormatInt(jobs[len(jobs)-1].ID, 10)
		out.Next = &next
	}
	return writeJSON(c, http.StatusOK, out)
}

// showJobAPI is GET /api/v1/jobs/:id: the job, and for a replay its
// outcomes per group and up to 50 copies that failed again.
func (s *Server) showJobAPI(c echo.Context) error {
	id, err := pathJobID(c)
	if err != nil {
		return err
	}
	jv, err := s.broker.JobDetail(c.Request().Context(), id)
	if err != nil {
		return err
	}
	out := jobDetailJSON{Job: toJobJSON(jv.Job), Outcomes: []outcomeJSON{}, Failures: []failureJSON{}}
	for _, o := range jv.Outcomes {
		out.Outcomes = append(out.Outcomes, outcomeJSON{ConsumerGroup: o.Group, Replayed: o.Replayed, Succeeded: o.Succeeded, Failed: o.Failed, Pending: o.Pending()})
	}
	for _, f := range jv.Failures {
		fj := failureJSON{ID: f.CopyID, Queue: f.Queue, ConsumerGroup: f.Group, SettledAt: timestamp(f.SettledAt), DeadLetter: f.DeadLetter}
		if f.DeadLetter {
			fj.Fingerprint, fj.ErrorMessage = optional(f.Fingerprint), &f.Error
		}
		out.Failures = append(out.Failures, fj)
	}
	return writeJSON(c, http.StatusOK, out)
}

// jobActionAPI answers a job's action with the job (undo: 202 with the
// restore job it started).
func (s *Server) jobActionAPI(c echo.Context, name string, act jobAction) error {
	j, err := s.doJobAction(c, name, act, actor(c))
	if err != nil {
		return err
	}
	status := http.StatusOK
	if name == "undo" {
		status = http.StatusAccepted
		c.Response().Header().Set(echo.HeaderLocation, apiPrefix+"/jobs/"+strconv.FormatInt(j.ID, 10))
	}
	return writeJSON(c, status, jobAnswer{Job: toJobJSON(j)})
}

func (s *Server) pauseJobAPI(c echo.Context) error {
	return s.jobActionAPI(c, "pause", s.broker.PauseJob)
}

func (s *Server) resumeJobAPI(c echo.Context) error {
	return s.jobActionAPI(c, "resume", s.broker.ResumeJob)
}

func (s *Server) cancelJobAPI(c echo.Context) error {
	return s.jobActionAPI(c, "cancel", s.broker.CancelJob)
}

func (s *Server) undoJobAPI(c echo.Context) error {
	return s.jobActionAPI(c, "undo", s.broker.UndoJob)
}
