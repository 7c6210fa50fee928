package web

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Error groups you own (SPEC section 7, broker/errorgroup_owned.go):
// GET /api/v1/error-groups lists them across queues, GET
// /api/v1/error-groups/:fingerprint reads one (its versions, trend and
// history), POST /api/v1/error-groups/:fingerprint/state changes its
// state. A fingerprint holds spaces, slashes and quotes: it travels
// URL-escaped in the path, and pathParam unescapes it.

// defaultErrorGroupLimit is how many groups the list returns unless
// limit says (at most broker.MaxErrorGroups).
const defaultErrorGroupLimit = 50

// funnelJSON is a group's funnel over one span: what became of its dead
// letters (broker.Funnel).
type funnelJSON struct {
	Filed       int64 `json:"filed"`
	Replayed    int64 `json:"replayed"`
	Succeeded   int64 `json:"succeeded"`
	FailedAgain int64 `json:"failedAgain"`
	Deleted     int64 `json:"deleted"`
	Expired     int64 `json:"expired"`
	// Lost: replayed copies whose outcome will never come (whole life).
	Lost int64 `json:"lost"`
}

func toFunnelJSON(f broker.Funnel) funnelJSON {
	return funnelJSON{Filed: f.Filed, Replayed: f.Replayed, Succeeded: f.Succeeded, FailedAgain: f.FailedAgain, Deleted: f.Deleted, Expired: f.Expired, Lost: f.Lost}
}

// funnelsJSON is a group's funnel over its whole life, the last 24 hours
// and the last 7 days.
type funnelsJSON struct {
	Life funnelJSON `json:"life"`
	Day  funnelJSON `json:"day"`
	Week funnelJSON `json:"week"`
}

// evidenceJSON is what the group's replayed copies did since its state
// began: what a resolve is judged by.
type evidenceJSON struct {
	Since       timestamp `json:"since"` // null: the state never changed (the group's whole life)
	Replayed    int64     `json:"replayed"`
	Succeeded   int64     `json:"succeeded"`
	FailedAgain int64     `json:"failedAgain"`
	Pending     int64     `json:"pending"`
}

func toEvidenceJSON(g broker.OwnedErrorGroup) evidenceJSON {
	r, ok, failed, pending := g.Evidence()
	return evidenceJSON{Since: timestamp(g.ChangedAt), Replayed: r, Succeeded: ok, FailedAgain: failed, Pending: pending}
}

// errorGroupVersionJSON is a consumer version that filed dead letters
// into the group.
type errorGroupVersionJSON struct {
	Version   string    `json:"version"`
	Filed     int64     `json:"filed"`
	FirstSeen timestamp `json:"firstSeen"`
	LastSeen  timestamp `json:"lastSeen"`
}

// errorGroupChangeJSON is one change of the group's state.
type errorGroupChangeJSON struct {
	At    timestamp `json:"at"`
	Actor string    `json:"actor"`
	From  string    `json:"from"`
	To    string    `json:"to"`
	Why   string    `json:"why"`
}

// errorGroupJSON is an error group with its state, funnel and versions,
// one shape in the list and alone; trend and history only alone.
type errorGroupJSON struct {
	ID            int64   `json:"id"`
	Queue         string  `json:"queue"`
	ConsumerGroup string  `json:"consumerGroup"`
	Fingerprint   string  `json:"fingerprint"`
	State         string  `json:"state"`
	Regressed     bool    `json:"regressed"`
	Owner         *string `json:"owner"`
	Note          *string `json:"note"`
	Link          *string `json:"link"`
	Version       *string `json:"version"`
	// IgnoredUntil and IgnoredUntilFiled are an ignore's end (null:
	// none; both null while ignored: for ever).
	IgnoredUntil      *timestamp  `json:"ignoredUntil"`
	IgnoredUntilFiled *int64      `json:"ignoredUntilFiled"`
	ChangedAt         timestamp   `json:"changedAt"`
	ChangedBy         *string     `json:"changedBy"`
	DeadLetters       int64       `json:"deadLetters"`
	FirstSeen         timestamp   `json:"firstSeen"`
	LastSeen          timestamp   `json:"lastSeen"`
	SampleError       *string     `json:"sampleError"`
	Funnel            funnelsJSON `json:"funnel"`
	// Pending is how many replayed copies have not settled yet.
	Pending  int64                   `json:"pending"`
	Evidence evidenceJSON            `json:"evidence"`
	Versions []errorGroupVersionJSON `json:"versions"`
	Trend    []int64                 `json:"trend,omitempty"`
}

// errorGroupDetailJSON is one group as GET
// /api/v1/error-groups/:fingerprint answers it: with its versions and
// history, [] when none.
type errorGroupDetailJSON struct {
	errorGroupJSON
	Versions []errorGroupVersionJSON `json:"versions"`
	History  []errorGroupChangeJSON  `json:"history"`
}

func toErrorGroupJSON(g broker.OwnedErrorGroup) errorGroupJSON {
	j := errorGroupJSON{ID: g.ID, Queue: g.Queue, ConsumerGroup: g.Group, Fingerprint: g.Fingerprint, State: string(g.State), Regressed: g.Regressed,
		Owner: optional(g.Owner), Note: optional(g.Note), Link: optional(g.Link), Version: optional(g.Version),
		IgnoredUntil: optionalTime(g.UntilAt), ChangedAt: timestamp(g.ChangedAt), ChangedBy: optional(g.ChangedBy),
		DeadLetters: g.DeadLetters, FirstSeen: timestamp(g.FirstFiledAt), LastSeen: timestamp(g.LastFiledAt), SampleError: optional(g.SampleError),
		Funnel:  funnelsJSON{Life: toFunnelJSON(g.Life), Day: toFunnelJSON(g.Day), Week: toFunnelJSON(g.Week)},
		Pending: g.Life.Pending(), Evidence: toEvidenceJSON(g), Trend: g.Trend}
	if g.UntilFiled > 0 {
		n := g.UntilFiled
		j.IgnoredUntilFiled = &n
	}
	j.Versions = []errorGroupVersionJSON{}
	for _, v := range g.Versions {
		j.Versions = append(j.Versions, errorGroupVersionJSON{Version: v.Version, Filed: v.Filed, FirstSeen: timestamp(v.FirstSeen), LastSeen: timestamp(v.LastSeen)})
	}
	return j
}

// detailJSON is a group with its history, as GET answers it alone.
func detailJSON(g broker.OwnedErrorGroup, h []broker.ErrorGroupChange) errorGroupDetailJSON {
	j := errorGroupDetailJSON{errorGroupJSON: toErrorGroupJSON(g), History: make([]errorGroupChangeJSON, 0, len(h))}
	j.Versions = j.errorGroupJSON.Versions
	if j.Versions == nil {
		j.Versions = []errorGroupVersionJSON{}
	}
	for _, ch := range h {
		j.History = append(j.History, errorGroupChangeJSON{At: timestamp(ch.At), Actor: ch.Actor, From: string(ch.From), To: string(ch.To), Why: ch.Why})
	}
	return j
}

// errorGroupsJSON is groups in errorGroupJSON's shape, [] when none.
func errorGroupsJSON(gs []broker.OwnedErrorGroup) []errorGroupJSON {
	out := make([]errorGroupJSON, len(gs))
	for i, g := range gs {
		out[i] = toErrorGroupJSON(g)
	}
	return out
}

// parseGroupState reads an error group's state as a request names it:
// "" when empty and allowed, else one of broker.ErrorGroupStates.
func parseGroupState(s string, required bool) (broker.ErrorGroupState, error) {
	if s == "" && !required {
		return "", nil
	}
	for _, st := range broker.ErrorGroupStates {
		if string(st) == s {
			return st, nil
		}
	}
	return "", badRequest("state must be open, acknowledged, resolved or ignored, got %q", truncate(s, 32))
}

// listErrorGroups answers GET /api/v1/error-groups?queue=&consumerGroup=
// &state=&owner=&consumerVersion=&limit=: open groups first (regressed
// first among them), then acknowledged, resolved and ignored.
func (s *Server) listErrorGroups(c echo.Context) error {
	state, err := parseGroupState(c.QueryParam("state"), false)
	if err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", defaultErrorGroupLimit)
	if err != nil {
		return err
	}
	if limit < 1 || limit > broker.MaxErrorGroups {
		return badRequest("limit must be between 1 and %d", broker.MaxErrorGroups)
	}
	gs, err := s.broker.ErrorGroupList(c.Request().Context(), broker.ErrorGroupFilter{Scope: scopeOf(c.Request().Context()), Queue: c.QueryParam("queue"), Group: c.QueryParam("consumerGroup"),
		State: state, Owner: c.QueryParam("owner"), Version: c.QueryParam("consumerVersion"), Limit: limit})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, struct {
		ErrorGroups []errorGroupJSON `json:"errorGroups"`
	}{errorGroupsJSON(gs)})
}

// showErrorGroup answers GET /api/v1/error-groups/:fingerprint?queue=
// &consumerGroup=: the group with its versions, trend and history.
// Without consumerGroup, the queue's one consumer group that has the
// fingerprint; with several the broker says which (400).
func (s *Server) showErrorGroup(c echo.Context) error {
	fp, err := pathParam(c, "fingerprint")
	if err != nil {
		return err
	}
	queue := c.QueryParam("queue")
	if queue == "" {
		return badRequest("queue is required: a fingerprint names an error group within a queue")
	}
	if err := checkQueue(c, queue); err != nil {
		return err
	}
	g, h, err := s.broker.ErrorGroupByKey(c.Request().Context(), queue, c.QueryParam("consumerGroup"), fp)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, detailJSON(g, h))
}

// groupStateRequest is POST /api/v1/error-groups/:fingerprint/state's
// body.
type groupStateRequest struct {
	Queue         string `json:"queue"`
	ConsumerGroup string `json:"consumerGroup"`
	State         string `json:"state"`
	// Owner, Note, Link and Version: absent keeps what the group has,
	// "" clears it.
	Owner      *string `json:"owner"`
	Note       *string `json:"note"`
	Link       *string `json:"link"`
	Version    *string `json:"version"`
	Until      string  `json:"until"` // RFC 3339
	UntilCount int64   `json:"untilCount"`
	Force      bool    `json:"force"`
}

// conflictResponse is a refused resolve's answer: the error, and the
// evidence of each group it was refused for.
type conflictResponse struct {
	Error    string          `json:"error"`
	Evidence []groupEvidence `json:"evidence,omitempty"`
}

// groupEvidence is one group's evidence in a refused resolve.
type groupEvidence struct {
	ConsumerGroup string `json:"consumerGroup"`
	evidenceJSON
}

// setErrorGroupState answers POST /api/v1/error-groups/:fingerprint/state:
// the groups as they are after (several without consumerGroup: every
// consumer group of the queue with the fingerprint). A resolve while
// copies are pending or failed again since the state began is refused,
// 409 with that evidence, unless "force".
func (s *Server) setErrorGroupState(c echo.Context) error {
	fp, err := pathParam(c, "fingerprint")
	if err != nil {
		return err
	}
	var req groupStateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Queue == "" {
		return badRequest("queue is required: a fingerprint names an error group within a queue")
	}
	if err := checkQueue(c, req.Queue); err != nil {
		return err
	}
	state, err := parseGroupState(req.State, true)
	if err != nil {
		return err
	}
	until, err := parseTime("until", req.Until)
	if err != nil {
		return err
	}
	if req.UntilCount < 0 {
		return badRequest("untilCount must be a positive number of dead letters")
	}
	ctx := c.Request().Context()
	gs, err := s.broker.SetErrorGroupState(ctx, broker.StateChange{Queue: req.Queue, Group: req.ConsumerGroup, Fingerprint: fp, State: state,
		Owner: trimmed(req.Owner), Note: req.Note, Link: trimmed(req.Link), Version: trimmed(req.Version), Until: until, UntilCount: req.UntilCount,
		Force: req.Force, Actor: actor(c)})
	if errors.Is(err, broker.ErrConflict) {
		return s.refusedResolve(c, req, fp, err)
	}
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, struct {
		ErrorGroups []errorGroupJSON `json:"errorGroups"`
	}{errorGroupsJSON(gs)})
}

// refusedResolve answers a resolve the broker refused (ErrConflict): 409,
// its message (which says why), and the evidence of the group read again
// (left out when that read fails, or when several consumer groups have
// the fingerprint: the message says it for each).
func (s *Server) refusedResolve(c echo.Context, req groupStateRequest, fp string, err error) error {
	status, message, _ := statusOf(err)
	out := conflictResponse{Error: message}
	ctx, cancel := s.withTimeout(c, 5*time.Second)
	defer cancel()
	if g, _, rerr := s.broker.ErrorGroupByKey(ctx, req.Queue, req.ConsumerGroup, fp); rerr == nil {
		out.Evidence = append(out.Evidence, groupEvidence{ConsumerGroup: g.Group, evidenceJSON: toEvidenceJSON(g)})
	}
	return writeJSON(c, status, out)
}

// trimmed is *p without the spaces around it; nil stays nil.
func trimmed(p *string) *string {
	if p == nil {
		return nil
	}
	t := strings.TrimSpace(*p)
	return &t
}
