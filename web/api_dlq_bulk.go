package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// bulkRequest names dead letters either by message id or by a filter.
type bulkRequest struct {
	IDs []string `json:"ids"`
	// ConsumerGroup, with ids on delete, deletes only that group's dead
	// letters of the messages.
	ConsumerGroup string      `json:"consumerGroup"`
	Filter        *bulkFilter `json:"filter"`
	// All, with a filter that names no queue, acts on the dead letters of
	// every queue: never by default. Alone it is the empty filter's.
	All bool `json:"all"`
	// Bound, with a filter, acts only on dead letters at or below it (a
	// dry run's, or an earlier answer's); without one the action takes
	// its own as it starts. Either way the answer says the bound used: a
	// failedAt in the future is kept to now (or to the newest failure the
	// filter selects, if the clock went back), an id to the highest row
	// id. A replay also removes its messages' dead letters in every other
	// group, the filter's or not, below the bound or above it (SPEC 4).
	Bound *boundIn `json:"bound"`
	// DryRun, with a filter, changes nothing: the answer counts what the
	// filter selects, in dead letters ("matching") and in messages
	// ("messages": a message dead-lettered by several groups has a dead
	// letter in each, and a replay's done counts it once), and gives the
	// bound that freezes it.
	DryRun bool `json:"dryRun"`
	// Mode of a replay: "every" (the default: every group that reads the
	// partition sees the copy) or "own" (only the group whose dead letter
	// it was; the other groups pass it by and keep theirs).
	Mode string `json:"mode"`
	// Rate limits the job: messages (a delete: dead letters) a second at
	// most, 0 for none.
	Rate int `json:"rate"`
	// Pace: "gentle" (the default: a chunk holds the writer about 2 ms,
	// so that pushes beside the job wait little, and the job rests
	// between chunks while pushes, acks and pops that lease come) or
	// "full" (flat out: chunks of 20,000 rows).
	Pace string `json:"pace"`
	// Force, on a replay, replays the messages at their queue's replay
	// cap (maxReplays) too; without it they are skipped and counted
	// ("capped"). Audited as forced.
	Force bool `json:"force"`
	// Destination, on a replay, sends the copies to the end of that
	// queue's partition instead of each message's own (either or both;
	// made if missing, with the default options); kept with the job.
	Destination *destinationJSON `json:"destination"`
	// Canary, on a replay: begin with count dead letters drawn at random
	// (SPEC section 4).
	Canary *canaryIn `json:"canary"`
	// Wait answers when the job is finished or paused (200, with the job
	// and its counts as a bulk action answered before jobs), instead of
	// as it starts (202, the job).
	Wait bool `json:"wait"`
}

// jobRequest is the job the request starts (its ids or its filter as
// query gives it).
func (r bulkRequest) jobRequest(kind string, q *broker.DLQQuery, who string) (broker.JobRequest, error) {
	jr := broker.JobRequest{Kind: kind, IDs: r.IDs, Query: q, Rate: r.Rate, Actor: who, Group: r.ConsumerGroup, Force: r.Force}
	if r.Rate < 0 || r.Rate > broker.MaxJobRate {
		return jr, badRequest("rate must be between 0 (no limit) and %d a second", broker.MaxJobRate)
	}
	switch r.Pace {
	case "", paceGentle:
	case broker.PaceFull:
		jr.Pace = broker.PaceFull
	default:
		return jr, badRequest("pace must be %q or %q", paceGentle, broker.PaceFull)
	}
	if r.Force && kind != broker.JobReplay {
		return jr, badRequest("force goes with a replay")
	}
	if r.Destination != nil {
		if kind != broker.JobReplay {
			return jr, badRequest("destination goes with a replay")
		}
		d, err := r.Destination.destination("destination.")
		if err != nil {
			return jr, err
		}
		jr.Destination = d
	}
	if r.Canary != nil {
		if kind != broker.JobReplay {
			return jr, badRequest("canary goes with a replay: a delete has nothing to try first")
		}
		c, err := r.Canary.canary()
		if err != nil {
			return jr, err
		}
		jr.Canary = &c
	}
	switch r.Mode {
	case "", "every":
		jr.Mode = broker.ReplayEveryGroup
	case "own":
		if kind != broker.JobReplay {
			return jr, badRequest("mode is for replays: a delete deletes the dead letters it names")
		}
		jr.Mode = broker.ReplayOwnGroup
	default:
		return jr, badRequest(`mode must be "every" (every group sees the copy) or "own" (only the group that gave up on it)`)
	}
	return jr, nil
}

// canaryIn is a replay's canary as a request gives it: count required,
// settleSeconds (default 120) and maxFailed (default 0) optional.
type canaryIn struct {
	Count         *int `json:"count"`
	SettleSeconds *int `json:"settleSeconds"`
	MaxFailed     *int `json:"maxFailed"`
}

func (c canaryIn) canary() (broker.Canary, error) {
	var out broker.Canary
	if c.Count == nil {
		return out, badRequest("canary.count is required (1 to %d)", broker.MaxCanaryCount)
	}
	out.Count = *c.Count
	out.SettleSeconds = broker.DefaultCanarySettleSeconds
	if c.SettleSeconds != nil {
		if *c.SettleSeconds < 1 {
			return out, badRequest("canary.settleSeconds must be between 1 and %d (default %d)", broker.MaxCanarySettleSeconds, broker.DefaultCanarySettleSeconds)
		}
		out.SettleSeconds = *c.SettleSeconds
	}
	if c.MaxFailed != nil {
		out.MaxFailed = *c.MaxFailed
	}
	return out, nil
}

// bulkFilter selects dead letters like GET /api/v1/dlq does. A filter
// that names no queue needs all (here or beside the filter).
type bulkFilter struct {
	Queue         string `json:"queue,omitempty"`
	ConsumerGroup string `json:"consumerGroup,omitempty"`
	Partition     string `json:"partition,omitempty"`
	From          string `json:"from,omitempty"`
	To            string `json:"to,omitempty"`
	Error         string `json:"error,omitempty"`
	TransactionID string `json:"transactionId,omitempty"`
	Fingerprint   string `json:"fingerprint,omitempty"` // an error group
	// ConsumerVersion: the dead letters an ack of this version filed.
	ConsumerVersion string `json:"consumerVersion,omitempty"`
	All             bool   `json:"all,omitempty"`
	// Q is free text in payloads and errors, Field payload field
	// filters, as GET /api/v1/dlq's q and field.
	Q     string   `json:"q,omitempty"`
	Field []string `json:"field,omitempty"`
}

// bulkBound is a broker.Bound as the API writes it.
type bulkBound struct {
	FailedAt timestamp `json:"failedAt"`
	ID       int64     `json:"id"`
}

// boundIn is the bound of a request: failedAt (RFC 3339) is required;
// id, the dead letters' row id, may be left out (the highest there is).
type boundIn struct {
	FailedAt string `json:"failedAt"`
	ID       int64  `json:"id"`
}

func (b boundIn) bound() (broker.Bound, error) {
	if b.FailedAt == "" {
		return broker.Bound{}, badRequest("bound.failedAt is required")
	}
	at, err := parseTime("bound.failedAt", b.FailedAt)
	if err != nil {
		return broker.Bound{}, err
	}
	if b.ID < 0 {
		return broker.Bound{}, badRequest("bound.id must not be negative")
	}
	return broker.Bound{FailedAt: at, ID: b.ID}, nil
}

// query converts the filter for the broker. A filter with no queue is
// refused unless all says "every queue".
func (r bulkRequest) query() (broker.DLQQuery, error) {
	f := *r.Filter
	all := r.All || f.All
	q := broker.DLQQuery{Queue: f.Queue, Group: f.ConsumerGroup, Partition: f.Partition, ErrorContains: f.Error, TransactionID: f.TransactionID, Fingerprint: f.Fingerprint, AllQueues: all,
		Text: f.Q, Fields: f.Field, ConsumerVersion: f.ConsumerVersion}
	var err error
	if q.From, err = parseTime("filter.from", f.From); err != nil {
		return q, err
	}
	if q.To, err = parseTime("filter.to", f.To); err != nil {
		return q, err
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.To.After(q.From) {
		return q, badRequest("filter.to must be after filter.from")
	}
	switch {
	case f.Queue == "" && !all:
		return q, badRequest(`filter.queue is empty: name a queue, or send "all": true to act on the dead letters of every queue; nothing was changed`)
	case f.Queue != "" && all:
		return q, badRequest(`"all": true means every queue: it cannot go with filter.queue`)
	}
	if r.Bound != nil {
		b, err := r.Bound.bound()
		if err != nil {
			return q, err
		}
		q.Bound = &b
	}
	return q, nil
}

// decodeBulkRequest reads a bulk request; exactly one of ids and filter
// must be given ("all" alone is the empty filter).
func decodeBulkRequest(c echo.Context) (bulkRequest, error) {
	var req bulkRequest
	if err := decodeJSON(c, &req); err != nil {
		return req, err
	}
	if req.Filter == nil && req.IDs == nil && req.All {
		req.Filter = &bulkFilter{}
	}
	if (req.IDs == nil) == (req.Filter == nil) {
		return req, badRequest("give either ids or filter")
	}
	if req.IDs != nil && len(req.IDs) == 0 {
		return req, badRequest("ids: at least one is required")
	}
	if req.Filter != nil && req.ConsumerGroup != "" {
		return req, badRequest("consumerGroup goes inside filter")
	}
	if req.IDs != nil && (req.All || req.Bound != nil || req.DryRun) {
		return req, badRequest("all, bound and dryRun go with a filter; ids name their dead letters already")
	}
	if req.DryRun && req.Wait {
		return req, badRequest("wait goes with an action; a dry run changes nothing and answers at once")
	}
	return req, nil
}

type bulkResponse struct {
	// Done counts messages for a replay, dead letters for a delete by
	// filter (by ids: the messages whose dead letters were deleted).
	Done    int64 `json:"done"`
	Skipped int64 `json:"skipped"`
	Failed  int64 `json:"failed"`
	// Capped, of a replay: how many were at their queue's replay cap
	// (maxReplays): skipped (in skipped too), or, with force, replayed.
	Capped int64 `json:"capped"`
	// By filter only: what a dry run counted (dead letters, and their
	// messages), the bound kept to, and how many dead letters matching the
	// filter were filed after it was taken (a row id above bound.id; not
	// touched). arrivedSince is left out until the job is done (a job
	// that failed, was cancelled or paused did not count them); older
	// dead letters that failed after a bound.failedAt given earlier than
	// theirs are not in it.
	Matching     *int64     `json:"matching,omitempty"`
	Messages     *int64     `json:"messages,omitempty"`
	Bound        *bulkBound `json:"bound,omitempty"`
	ArrivedSince *int64     `json:"arrivedSince,omitempty"`
}

// waitedJob is the answer of a bulk action with "wait": true: the job,
// and its counts as a bulk action answered before jobs.
type waitedJob struct {
	Job jobJSON `json:"job"`
	bulkResponse
}

// waitedFailure is the answer of a job that failed while waited for:
// what was done before it stays done.
type waitedFailure struct {
	Error string `json:"error"`
	waitedJob
}

// countMatching answers a dry run: how many dead letters the filter
// selects and how many messages they are, and the bound that freezes them.
func (s *Server) countMatching(c echo.Context, q broker.DLQQuery) error {
	q.Scope = scopeOf(c.Request().Context())
	n, err := s.broker.CountMatching(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, bulkResponse{Matching: &n.Count, Messages: &n.Messages, Bound: &bulkBound{FailedAt: timestamp(n.Bound.FailedAt), ID: n.Bound.ID}})
}

// startBulkJob starts the job of a bulk request: 202 with the job, or,
// with wait, 200 once it is finished or paused, with the job and its
// counts (500 with them when it failed).
func (s *Server) startBulkJob(c echo.Context, req bulkRequest, kind string, q *broker.DLQQuery) error {
	jr, err := req.jobRequest(kind, q, actor(c))
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	jr.Scope = scopeOf(ctx)
	j, err := s.broker.StartJob(ctx, jr)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, apiPrefix+"/jobs/"+strconv.FormatInt(j.ID, 10))
	if !req.Wait {
		return writeJSON(c, http.StatusAccepted, jobAnswer{Job: toJobJSON(j)})
	}
	if j, err = s.broker.WaitJob(ctx, j.ID); err != nil {
		return err
	}
	out := waitedJob{Job: toJobJSON(j), bulkResponse: bulkResponse{Done: j.Done, Skipped: j.Skipped, Failed: j.Failed, Capped: j.Capped, ArrivedSince: arrivedOf(j)}}
	if f := j.Scope.Filter; f != nil && f.Bound != nil {
		out.Bound = &bulkBound{FailedAt: timestamp(f.Bound.FailedAt), ID: f.Bound.ID}
	}
	if j.State == broker.JobFailed {
		return writeJSON(c, http.StatusInternalServerError, waitedFailure{Error: internalMessage, waitedJob: out})
	}
	return writeJSON(c, http.StatusOK, out)
}

// arrivedOf is a job's arrivedSince for the answer: by filter, once counted.
func arrivedOf(j broker.Job) *int64 {
	if j.Scope.Filter == nil || j.ArrivedSince < 0 {
		return nil
	}
	n := j.ArrivedSince
	return &n
}

// replayDeadLetters starts a job that replays the messages named by id,
// or every one the filter matches at or below the bound; each exactly
// once or not at all.
func (s *Server) replayDeadLetters(c echo.Context) error {
	req, err := decodeBulkRequest(c)
	if err != nil {
		return err
	}
	if req.ConsumerGroup != "" && req.Mode != "own" {
		return badRequest(`consumerGroup goes with "mode": "own" on a replay (only that group's dead letters, each replayed to it alone): a replay to every group replays a message for all of them`)
	}
	if req.Filter == nil {
		return s.startBulkJob(c, req, broker.JobReplay, nil)
	}
	q, err := req.query()
	if err != nil {
		return err
	}
	if err := s.masksOf(c).query(q); err != nil {
		return err // a count by a masked field would tell its values
	}
	if req.DryRun {
		return s.countMatching(c, q)
	}
	return s.startBulkJob(c, req, broker.JobReplay, &q)
}

// deleteDeadLetters starts a job that deletes the dead letters of the
// messages named by id (only consumerGroup's when given), or every one
// the filter matches.
func (s *Server) deleteDeadLetters(c echo.Context) error {
	req, err := decodeBulkRequest(c)
	if err != nil {
		return err
	}
	if req.Filter == nil {
		return s.startBulkJob(c, req, broker.JobDelete, nil)
	}
	q, err := req.query()
	if err != nil {
		return err
	}
	if err := s.masksOf(c).query(q); err != nil {
		return err // a count by a masked field would tell its values
	}
	if req.DryRun {
		return s.countMatching(c, q)
	}
	return s.startBulkJob(c, req, broker.JobDelete, &q)
}
