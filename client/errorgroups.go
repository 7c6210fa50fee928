package client

import (
	"context"
	"net/http"
	"time"
)

// Error group states (SPEC section 7).
const (
	StateOpen         = "open"
	StateAcknowledged = "acknowledged"
	StateResolved     = "resolved"
	StateIgnored      = "ignored"
)

// Funnel is what became of an error group's dead letters over a span.
type Funnel struct {
	Filed       int64 `json:"filed"`
	Replayed    int64 `json:"replayed"`
	Succeeded   int64 `json:"succeeded"`
	FailedAgain int64 `json:"failedAgain"`
	Deleted     int64 `json:"deleted"`
	Expired     int64 `json:"expired"`
	Lost        int64 `json:"lost"`
}

// ErrorGroup is an error group (a fingerprint in a queue and consumer
// group) with its state, owner and funnel.
type ErrorGroup struct {
	ID                int64      `json:"id"`
	Queue             string     `json:"queue"`
	ConsumerGroup     string     `json:"consumerGroup"`
	Fingerprint       string     `json:"fingerprint"`
	State             string     `json:"state"`
	Regressed         bool       `json:"regressed"`
	Owner             *string    `json:"owner"`
	Note              *string    `json:"note"`
	Link              *string    `json:"link"`
	Version           *string    `json:"version"`
	IgnoredUntil      *time.Time `json:"ignoredUntil"`
	IgnoredUntilFiled *int64     `json:"ignoredUntilFiled"`
	ChangedAt         time.Time  `json:"changedAt"`
	ChangedBy         *string    `json:"changedBy"`
	DeadLetters       int64      `json:"deadLetters"`
	FirstSeen         time.Time  `json:"firstSeen"`
	LastSeen          time.Time  `json:"lastSeen"`
	SampleError       *string    `json:"sampleError"`
	Funnel            struct {
		Life Funnel `json:"life"`
		Day  Funnel `json:"day"`
		Week Funnel `json:"week"`
	} `json:"funnel"`
	Pending int64 `json:"pending"`
}

// ErrorGroupList is GET /api/v1/error-groups's answer, and a state
// change's (the groups as they are after).
type ErrorGroupList struct {
	body
	ErrorGroups []ErrorGroup `json:"errorGroups"`
}

// ErrorGroupFilter selects error groups: Queue, ConsumerGroup, State,
// Owner, ConsumerVersion; Limit (0: the server's 50).
type ErrorGroupFilter struct {
	Queue           string
	ConsumerGroup   string
	State           string
	Owner           string
	ConsumerVersion string
	Limit           int
}

// ErrorGroups lists error groups: open first (regressed first among
// them), then acknowledged, resolved and ignored.
func (c *Client) ErrorGroups(ctx context.Context, f ErrorGroupFilter) (*ErrorGroupList, error) {
	q := params("queue", f.Queue, "consumerGroup", f.ConsumerGroup, "state", f.State, "owner", f.Owner, "consumerVersion", f.ConsumerVersion)
	setNumber(q, "limit", f.Limit)
	var out ErrorGroupList
	_, err := c.call(ctx, http.MethodGet, "/error-groups", q, nil, &out)
	return &out, err
}

// ErrorGroupDetail is one error group with its history (in Raw too).
type ErrorGroupDetail struct {
	body
	ErrorGroup
	History []struct {
		At    time.Time `json:"at"`
		Actor string    `json:"actor"`
		From  string    `json:"from"`
		To    string    `json:"to"`
		Why   string    `json:"why"`
	} `json:"history"`
}

// ErrorGroup reads the error group of fingerprint in queue (and group;
// "": the queue's one consumer group that has it).
func (c *Client) ErrorGroup(ctx context.Context, fingerprint, queue, group string) (*ErrorGroupDetail, error) {
	q := params("queue", queue, "consumerGroup", group)
	var out ErrorGroupDetail
	_, err := c.call(ctx, http.MethodGet, "/error-groups/"+seg(fingerprint), q, nil, &out)
	return &out, err
}

// StateChange is POST /api/v1/error-groups/:fingerprint/state's body.
// Owner, Note, Link and Version: nil keeps what the group has, "" clears
// it.
type StateChange struct {
	Queue         string  `json:"queue"`
	ConsumerGroup string  `json:"consumerGroup,omitempty"`
	State         string  `json:"state"`
	Owner         *string `json:"owner,omitempty"`
	Note          *string `json:"note,omitempty"`
	Link          *string `json:"link,omitempty"`
	Version       *string `json:"version,omitempty"`
	Until         string  `json:"until,omitempty"` // RFC 3339
	UntilCount    int64   `json:"untilCount,omitempty"`
	Force         bool    `json:"force,omitempty"`
}

// SetErrorGroupState changes the state of the error group of fingerprint
// (in every consumer group of the queue that has it when ConsumerGroup is
// ""). A resolve while replayed copies are pending or failed again is an
// *Error with status 409 (its Body has the evidence) unless Force.
func (c *Client) SetErrorGroupState(ctx context.Context, fingerprint string, s StateChange) (*ErrorGroupList, error) {
	var out ErrorGroupList
	_, err := c.call(ctx, http.MethodPost, "/error-groups/"+seg(fingerprint)+"/state", nil, s, &out)
	return &out, err
}
