package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Filter selects dead letters as GET /api/v1/dlq's query does, and as a
// bulk action's "filter" does (the same names). Times are RFC 3339 text,
// passed on as given: the server checks them and says what is wrong.
type Filter struct {
	Queue         string `json:"queue,omitempty"`
	ConsumerGroup string `json:"consumerGroup,omitempty"`
	Partition     string `json:"partition,omitempty"`
	From          string `json:"from,omitempty"`
	To            string `json:"to,omitempty"`
	// Error: the error text contains it.
	Error         string `json:"error,omitempty"`
	TransactionID string `json:"transactionId,omitempty"`
	// Fingerprint: the dead letters of one error group.
	Fingerprint     string `json:"fingerprint,omitempty"`
	ConsumerVersion string `json:"consumerVersion,omitempty"`
	// Q is free text in payloads and errors; Field, payload field
	// filters such as "customer.tier=gold" (docs/concepts.md, Finding dead letters).
	Q     string   `json:"q,omitempty"`
	Field []string `json:"field,omitempty"`
}

func (f Filter) values() url.Values {
	v := params("queue", f.Queue, "consumerGroup", f.ConsumerGroup, "partition", f.Partition, "from", f.From, "to", f.To,
		"error", f.Error, "transactionId", f.TransactionID, "fingerprint", f.Fingerprint, "consumerVersion", f.ConsumerVersion, "q", f.Q)
	for _, fl := range f.Field {
		v.Add("field", fl)
	}
	return v
}

// PageRequest is the page of a list: Limit (0: the server's default),
// Offset, or After (the Next of the page before).
type PageRequest struct {
	Limit  int
	Offset int
	After  string
}

// DeadLetter is one dead letter: a message one consumer group gave up on.
type DeadLetter struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	ConsumerGroup string          `json:"consumerGroup"`
	ErrorMessage  *string         `json:"errorMessage"`
	RetryCount    int             `json:"retryCount"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     time.Time       `json:"createdAt"`
	FailedAt      time.Time       `json:"failedAt"`
	TraceID       *string         `json:"traceId"`
	IsReplay      bool            `json:"isReplay"`
	Fingerprint   string          `json:"fingerprint"`
	// ConsumerVersion: "" when the ack said none.
	ConsumerVersion string `json:"consumerVersion"`
	// ExpiresAt: nil when its queue keeps its dead letters.
	ExpiresAt *time.Time `json:"expiresAt"`
}

// DeadLetterList is a page of GET /api/v1/dlq.
type DeadLetterList struct {
	body
	Messages   []DeadLetter `json:"messages"`
	Total      int64        `json:"total"`
	Pagination struct {
		Limit  int `json:"limit"`
		Offset int `json:"offset"`
	} `json:"pagination"`
	// TotalCapped: there may be more matches than Total (a search).
	TotalCapped bool `json:"totalCapped"`
	// Next is the After of the next page; "" on the last.
	Next string `json:"next"`
}

// DeadLetters lists the dead letters f selects, newest failure first.
func (c *Client) DeadLetters(ctx context.Context, f Filter, p PageRequest) (*DeadLetterList, error) {
	q := f.values()
	setNumber(q, "limit", p.Limit)
	setNumber(q, "offset", p.Offset)
	if p.After != "" {
		q.Set("after", p.After)
	}
	var out DeadLetterList
	_, err := c.call(ctx, http.MethodGet, "/dlq", q, nil, &out)
	return &out, err
}

// DeadLetterDetail is GET /api/v1/dlq/:id: the dead letter, the message's
// dead letters in other groups, and its replay count against its queue's
// cap. History stays in Raw.
type DeadLetterDetail struct {
	body
	DeadLetter
	Others  []DeadLetter `json:"others"`
	Replays struct {
		Count      int  `json:"count"`
		MaxReplays int  `json:"maxReplays"`
		AtCap      bool `json:"atCap"`
	} `json:"replays"`
}

// DeadLetter reads a message's dead letter (group's, when not "") with
// its history. A dead letter that is gone is an *Error with status 404
// whose Body says what became of it.
func (c *Client) DeadLetter(ctx context.Context, id, group string) (*DeadLetterDetail, error) {
	q := params("consumerGroup", group)
	var out DeadLetterDetail
	_, err := c.call(ctx, http.MethodGet, "/dlq/"+seg(id), q, nil, &out)
	return &out, err
}

// Destination sends a replay's copy to the end of another partition
// (either or both; made if missing).
type Destination struct {
	Queue     string `json:"queue,omitempty"`
	Partition string `json:"partition,omitempty"`
}

// ReplayOptions are a single replay's options (all optional).
type ReplayOptions struct {
	// Payload replaces the copy's payload (edit and replay).
	Payload json.RawMessage `json:"payload,omitempty"`
	// Mode is "every" (the default) or "own": only ConsumerGroup (the
	// group that gave up on it) gets the copy.
	Mode          string       `json:"mode,omitempty"`
	ConsumerGroup string       `json:"consumerGroup,omitempty"`
	Force         bool         `json:"force,omitempty"`
	Destination   *Destination `json:"destination,omitempty"`
}

// ReplayResult is a replay's answer: Result is "moved" (a copy was made
// now) or "duplicate" (it was there already); the copy's ids and place.
type ReplayResult struct {
	body
	Success        bool     `json:"success"`
	Result         string   `json:"result"`
	Status         string   `json:"status"`
	MessageID      string   `json:"messageId"`
	TransactionID  string   `json:"transactionId"`
	PartitionID    string   `json:"partitionId"`
	Queue          string   `json:"queue"`
	Partition      string   `json:"partition"`
	ConsumerGroups []string `json:"consumerGroups"`
	DLQID          string   `json:"dlqId"`
}

// Replay replays one dead-lettered message. No dead letter (any more) is
// an *Error with status 404 whose Body has "result": "gone" and what
// became of it: a replay sent again after a timeout is safe.
func (c *Client) Replay(ctx context.Context, id string, o ReplayOptions) (*ReplayResult, error) {
	var out ReplayResult
	_, err := c.call(ctx, http.MethodPost, "/dlq/"+seg(id)+"/replay", nil, o, &out)
	return &out, err
}

// DeleteAnswer is a delete's answer: how many dead letters went (one a
// group the message was dead-lettered by).
type DeleteAnswer struct {
	body
	Deleted int `json:"deleted"`
}

// Delete deletes a message's dead letters (only group's when not ""), to
// be restored for a while.
func (c *Client) Delete(ctx context.Context, id, group string) (*DeleteAnswer, error) {
	q := params("consumerGroup", group)
	var out DeleteAnswer
	_, err := c.call(ctx, http.MethodDelete, "/dlq/"+seg(id), q, nil, &out)
	return &out, err
}

// Export writes every dead letter f selects to w, as format ("ndjson",
// the default, or "csv"), as the server streams it (operators: payloads
// may hold personal data). A download the server breaks off is an error:
// what w got is then not the whole.
func (c *Client) Export(ctx context.Context, f Filter, format string, w io.Writer) (int64, error) {
	q := f.values()
	if format != "" {
		q.Set("format", format)
	}
	resp, err := c.send(ctx, http.MethodGet, "/dlq/export", q, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return io.Copy(w, resp.Body)
}

// Bulk kinds: what a bulk action does.
const (
	BulkReplay = "replay"
	BulkDelete = "delete"
)

// Bound freezes a bulk action by filter: the dead letters at or below it
// (failedAt, then row id). A dry run gives one; pass it on unchanged.
type Bound struct {
	FailedAt string `json:"failedAt"`
	ID       int64  `json:"id"`
}

// Canary makes a replay job begin with Count dead letters drawn at
// random and wait for their copies to settle (SPEC section 4).
type Canary struct {
	Count         int  `json:"count"`
	SettleSeconds *int `json:"settleSeconds,omitempty"`
	MaxFailed     *int `json:"maxFailed,omitempty"`
}

// BulkRequest is POST /api/v1/dlq/replay's and /dlq/delete's body:
// either IDs or Filter (All: a filter that names no queue means every
// queue).
type BulkRequest struct {
	IDs []string `json:"ids,omitempty"`
	// ConsumerGroup, with IDs: only that group's dead letters (a delete,
	// or a replay with Mode "own").
	ConsumerGroup string       `json:"consumerGroup,omitempty"`
	Filter        *Filter      `json:"filter,omitempty"`
	All           bool         `json:"all,omitempty"`
	Bound         *Bound       `json:"bound,omitempty"`
	DryRun        bool         `json:"dryRun,omitempty"`
	Mode          string       `json:"mode,omitempty"`
	Rate          int          `json:"rate,omitempty"`
	Force         bool         `json:"force,omitempty"`
	Destination   *Destination `json:"destination,omitempty"`
	Canary        *Canary      `json:"canary,omitempty"`
}

// DryRun is what a bulk action by filter would touch: dead letters
// (Matching), the messages they are (a replay counts messages), and the
// Bound that freezes them.
type DryRun struct {
	body
	Matching int64 `json:"matching"`
	Messages int64 `json:"messages"`
	Bound    Bound `json:"bound"`
}

// DryRun counts what the bulk action kind (BulkReplay, BulkDelete) would
// touch with r's filter, changing nothing.
func (c *Client) DryRun(ctx context.Context, kind string, r BulkRequest) (*DryRun, error) {
	r.DryRun = true
	var out DryRun
	_, err := c.call(ctx, http.MethodPost, "/dlq/"+kind, nil, r, &out)
	return &out, err
}

// StartBulk starts the bulk action kind (BulkReplay, BulkDelete) as a
// job and returns it as it starts; follow it with Job.
func (c *Client) StartBulk(ctx context.Context, kind string, r BulkRequest) (*JobAnswer, error) {
	r.DryRun = false
	var out JobAnswer
	_, err := c.call(ctx, http.MethodPost, "/dlq/"+kind, nil, r, &out)
	return &out, err
}
