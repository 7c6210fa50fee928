package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

const jobsPageSize = 50

// jobPoll is when a job's page asks for its progress while the job runs,
// or a finished replay's copies are pending: at the job's news on the
// page's event stream (live.go), which a chunk done or a copy settled
// makes; and every 5 s besides, since news can be lost (PostgreSQL's,
// broker.Watch) and a stream refused (liveHub's bounds: 429).
const jobPoll = "sse:changed, every 5s"

var (
	jobStates = []string{broker.JobRunning, broker.JobPaused, broker.JobDone, broker.JobCancelled, broker.JobFailed}
	jobKinds  = []string{broker.JobReplay, broker.JobDelete, broker.JobRestore}
)

// pathJobID reads the job id of the path: a 404 when it cannot be one.
func pathJobID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, &apiError{status: http.StatusNotFound, message: "no such job"}
	}
	return id, nil
}

// readJobFilter reads the jobs filter and page of the query (the page
// and the API alike).
func readJobFilter(c echo.Context, limit int) (broker.JobFilter, broker.Page, error) {
	f := broker.JobFilter{State: c.QueryParam("state"), Kind: c.QueryParam("kind"), Queue: c.QueryParam("queue"), Scope: scopeOf(c.Request().Context())}
	if f.State != "" && !slices.Contains(jobStates, f.State) {
		return f, broker.Page{}, badRequest("state must be one of running, paused, done, cancelled, failed")
	}
	if f.Kind != "" && !slices.Contains(jobKinds, f.Kind) {
		return f, broker.Page{}, badRequest("kind must be replay, delete or restore")
	}
	p := broker.Page{Limit: limit}
	if a := c.QueryParam("after"); a != "" {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id < 1 {
			return f, p, badRequest("after must be a job id")
		}
		p.After = &broker.Cursor{ID: id}
	}
	return f, p, nil
}

// showJobs renders the Jobs page: newest first, filtered.
func (s *Server) showJobs(c echo.Context) error {
	f, p, err := readJobFilter(c, jobsPageSize)
	if err != nil {
		return err
	}
	jobs, err := s.broker.Jobs(c.Request().Context(), f, p)
	if err != nil {
		return err
	}
	v := views.JobsList{Page: s.page(c, "Jobs", "jobs"), Filter: views.JobsFilter{State: f.State, Kind: f.Kind, Queue: f.Queue}, States: jobStates, Kinds: jobKinds}
	for _, j := range jobs {
		v.Rows = append(v.Rows, views.JobRow{ID: j.ID, URL: jobURL(j.ID), Kind: j.Kind, State: j.State, Reason: j.Reason, Queue: j.Queue, Description: j.Description,
			Actor: j.Actor, CreatedAt: j.CreatedAt, Planned: j.Planned, Done: j.Done, Skipped: j.Skipped, Failed: j.Failed})
	}
	if len(jobs) == jobsPageSize {
		q := url.Values{}
		for k, val := range map[string]string{"state": f.State, "kind": f.Kind, "queue": f.Queue} {
			if val != "" {
				q.Set(k, val)
			}
		}
		q.Set("after", strconv.FormatInt(jobs[len(jobs)-1].ID, 10))
		v.NextURL = "/jobs?" + q.Encode()
	}
	return renderPage(c, http.StatusOK, views.JobsView(v), views.JobsContent(v))
}

// showJob renders a job's page.
func (s *Server) showJob(c echo.Context) error {
	id, err := pathJobID(c)
	if err != nil {
		return err
	}
	jv, err := s.broker.JobDetail(c.Request().Context(), id)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("Job #%d", id)
	v := views.JobPage{Page: s.page(c, title, "jobs", views.Crumb{Label: "Jobs", URL: "/jobs"}, views.Crumb{Label: title}), Job: s.jobDetail(c, jv)}
	return renderPage(c, http.StatusOK, views.JobView(v), views.JobContent(v))
}

// showJobProgress renders the live part of a job's page, which asks for
// itself again while the job runs.
func (s *Server) showJobProgress(c echo.Context) error {
	id, err := pathJobID(c)
	if err != nil {
		return err
	}
	jv, err := s.broker.JobDetail(c.Request().Context(), id)
	if err != nil {
		return err
	}
	c.Response().Header().Add(echo.HeaderVary, "HX-Request")
	return render(c, http.StatusOK, views.JobProgress(s.jobDetail(c, jv)))
}

// jobDetail is the view of a job for its page.
func (s *Server) jobDetail(c echo.Context, jv broker.JobView) views.JobDetail {
	j := jv.Job
	vs := s.viewSession(c)
	d := views.JobDetail{ID: j.ID, URL: jobURL(j.ID), ProgressURL: jobURL(j.ID) + "/progress", LiveURL: "/live" + jobURL(j.ID), Kind: j.Kind, State: j.State, Reason: j.Reason,
		Queue: j.Queue, Description: j.Description, Actor: j.Actor, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, FinishedAt: j.FinishedAt,
		Rate: j.Rate, Planned: j.Planned, Done: j.Done, Skipped: j.Skipped, Failed: j.Failed, Left: j.Left(), ArrivedSince: j.ArrivedSince,
		Capped: j.Capped, Forced: j.Scope.Force,
		ByFilter: j.Scope.Filter != nil, UndoOf: j.UndoOf, UndoneBy: j.UndoneBy, CSRFToken: vs.CSRFToken, AuditURL: jobAuditURL(j)}
	if j.Queue != "" {
		d.QueueURL = deadLettersURL(j.Queue, nil)
	}
	if j.Kind == broker.JobReplay {
		d.Mode = modeInWords(j.Scope)
	}
	if j.UndoOf != 0 {
		d.UndoOfURL = jobURL(j.UndoOf)
	}
	if j.UndoneBy != 0 {
		d.UndoneByURL = jobURL(j.UndoneBy)
	}
	for _, o := range jv.Outcomes {
		row := views.JobOutcomeRow{Group: o.Group, Replayed: o.Replayed, Succeeded: o.Succeeded, Failed: o.Failed, Expired: o.Expired, Pending: o.Pending()}
		d.Outcomes = append(d.Outcomes, row)
		d.Totals.Replayed += row.Replayed
		d.Totals.Succeeded += row.Succeeded
		d.Totals.Failed += row.Failed
		d.Totals.Expired += row.Expired
		d.Totals.Pending += row.Pending
	}
	for _, f := range jv.Failures {
		row := views.JobFailureRow{CopyID: f.CopyID, Queue: f.Queue, Group: f.Group, SettledAt: f.SettledAt}
		if f.DeadLetter {
			row.URL = deadLetterURL(f.Queue, f.CopyID, f.Group)
			row.Error = views.FirstLine(f.Error, 160)
			if f.Fingerprint != "" {
				row.ErrorURL = deadLettersURL(f.Queue, url.Values{"group": {f.Group}, "fingerprint": {f.Fingerprint}})
			}
		}
		d.Failures = append(d.Failures, row)
	}
	d.FailuresMore = int64(len(jv.Failures)) < d.Totals.Failed
	d.Canary = canaryStep(j)
	switch {
	case j.State == broker.JobRunning:
		d.Poll = jobPoll
	case j.Finished() && j.Kind == broker.JobReplay && d.Totals.Pending > 0:
		// The copies settle after the job: follow them, less often.
		d.Poll = jobPoll
	}
	if vs.CanOperate {
		d.CanPause = j.State == broker.JobRunning
		d.CanResume = j.State == broker.JobPaused || j.State == broker.JobFailed
		d.CanCancel = !j.Finished()
		// A delete running or paused can be undone too: it is cancelled,
		// and what it deleted so far restored; a finished one while what
		// it deleted is within its restore window.
		d.CanUndo = jv.Undoable
		d.UndoUntil = jv.RestorableUntil
	}
	return d
}

// modeInWords says where a replay job's copies go.
func modeInWords(sc broker.JobScope) string {
	if sc.Mode != broker.ReplayOwnGroup {
		return "every group that reads the partition"
	}
	if sc.Filter != nil && sc.Filter.Group != "" {
		return sc.Filter.Group + " only (the other groups pass the copies by)"
	}
	if sc.Group != "" {
		return sc.Group + " only (the other groups pass the copies by)"
	}
	return "only the group that gave up on each (the other groups pass the copies by)"
}

// jobAuditURL lists the job's audit entries: its own, and its pauses,
// resumes and cancels.
func jobAuditURL(j broker.Job) string {
	// Its people's entries and the broker's (a pause by itself, a failure).
	q := url.Values{"job": {strconv.FormatInt(j.ID, 10)}, "stream": {"all"}}
	return "/audit?" + q.Encode()
}

// jobAction is the broker call of a job's action.
type jobAction func(ctx context.Context, id int64, actor string) (broker.Job, error)

// jobVerbs say what each action would have done to a job.
var jobVerbs = map[string]string{"pause": "paused", "resume": "resumed", "cancel": "cancelled", "undo": "undone"}

// doJobAction runs a job's action and says why not when the job's state
// does not allow it (409).
func (s *Server) doJobAction(c echo.Context, name string, act jobAction, who string) (broker.Job, error) {
	id, err := pathJobID(c)
	if err != nil {
		return broker.Job{}, err
	}
	ctx := c.Request().Context()
	j, err := act(ctx, id, who)
	if errors.Is(err, broker.ErrConflict) {
		return j, s.jobConflict(ctx, id, name, err)
	}
	return j, err
}

// jobConflict says in words why a job's action cannot be done: the
// broker's reason, which names the job and its state.
func (s *Server) jobConflict(ctx context.Context, id int64, name string, cause error) error {
	var be *broker.Error
	if errors.As(cause, &be) && be.Message != "" {
		return &apiError{status: http.StatusConflict, message: be.Message}
	}
	msg := fmt.Sprintf("job #%d cannot be %s", id, jobVerbs[name])
	if jv, err := s.broker.JobDetail(ctx, id); err == nil {
		msg += ": it is " + jv.Job.State
	}
	return &apiError{status: http.StatusConflict, message: msg}
}

// jobActionPage answers a job's action on its page: htmx gets the
// progress back, a plain form is sent to the job's page.
func (s *Server) jobActionPage(c echo.Context, name string, act jobAction) error {
	j, err := s.doJobAction(c, name, act, s.pageActor(c))
	if err != nil {
		return err
	}
	if name == "undo" {
		// The restore is a job of its own: its page.
		if isFragment(c) {
			c.Response().Header().Set("HX-Redirect", jobURL(j.ID))
			return c.NoContent(http.StatusOK)
		}
		return c.Redirect(http.StatusSeeOther, jobURL(j.ID))
	}
	if !isFragment(c) {
		return c.Redirect(http.StatusSeeOther, jobURL(j.ID))
	}
	jv, err := s.broker.JobDetail(c.Request().Context(), j.ID)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.JobProgress(s.jobDetail(c, jv)))
}

func (s *Server) pauseJobPage(c echo.Context) error {
	return s.jobActionPage(c, "pause", s.broker.PauseJob)
}

func (s *Server) resumeJobPage(c echo.Context) error {
	return s.jobActionPage(c, "resume", s.broker.ResumeJob)
}

func (s *Server) cancelJobPage(c echo.Context) error {
	return s.jobActionPage(c, "cancel", s.broker.CancelJob)
}

func (s *Server) undoJobPage(c echo.Context) error {
	return s.jobActionPage(c, "undo", s.broker.UndoJob)
}

// jobURL is a job's page ("" for no job).
func jobURL(id int64) string {
	if id == 0 {
		return ""
	}
	return "/jobs/" + strconv.FormatInt(id, 10)
}

// canaryStep is a replay job's canary for its page (nil: none): each
// copy linked, the one that failed again to its dead letter (the search
// by its transactionId opens it).
func canaryStep(j broker.Job) *views.CanaryStep {
	c := j.Canary
	if c == nil {
		return nil
	}
	st := &views.CanaryStep{Count: c.Count, SettleSeconds: c.SettleSeconds, MaxFailed: c.MaxFailed, State: c.State, Until: c.Until, Reason: c.Reason,
		Rest: max(j.Planned-int64(c.Count), 0)}
	if len(c.Copies) > 0 {
		st.Rest = max(j.Planned-int64(len(c.Copies)), 0)
	}
	for _, cp := range c.Copies {
		r := views.CanaryCopyRow{DeadLetterID: cp.DeadLetterID, Group: cp.Group, Partition: cp.Partition, TransactionID: cp.TransactionID, Outcome: cp.Outcome}
		if cp.DeadLetterID != "" && cp.Queue != "" {
			r.DeadLetterURL = deadLetterURL(cp.Queue, cp.DeadLetterID, cp.Group)
		}
		if cp.TransactionID != "" {
			r.CopyURL = searchURL(cp.TransactionID)
		}
		switch cp.Outcome {
		case "failed":
			st.Failed++
			r.Error = views.FirstLine(cp.Error, 160)
		case "succeeded":
			st.Succeeded++
		default:
			st.Pending++
		}
		st.Copies = append(st.Copies, r)
	}
	if st.Reason == "" && c.State == broker.CanaryFailed {
		st.Reason = fmt.Sprintf("canary: %d of %d failed again", st.Failed, len(c.Copies))
	}
	return st
}
