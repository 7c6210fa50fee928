package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// SearchHit is one match of a search: a dead letter, or a message that
// is none (ConsumerGroup, ErrorLine nil and FailedAt zero).
type SearchHit struct {
	Match         string    `json:"match"`
	DeadLetter    bool      `json:"deadLetter"`
	ID            string    `json:"id"`
	Queue         string    `json:"queue"`
	Partition     string    `json:"partition"`
	PartitionID   string    `json:"partitionId"`
	ConsumerGroup *string   `json:"consumerGroup"`
	TransactionID string    `json:"transactionId"`
	TraceID       *string   `json:"traceId"`
	ErrorLine     *string   `json:"errorLine"`
	RetryCount    int       `json:"retryCount"`
	CreatedAt     time.Time `json:"createdAt"`
	FailedAt      time.Time `json:"failedAt"`
}

// SearchResult is GET /api/v1/search's answer.
type SearchResult struct {
	body
	Query      string      `json:"query"`
	SearchedAs []string    `json:"searchedAs"`
	More       bool        `json:"more"` // more than the limit matched
	Matches    []SearchHit `json:"matches"`
}

// Search finds messages and dead letters by id, transactionId, traceId
// or text, as the dashboard's search box does; limit 0: the server's 50.
func (c *Client) Search(ctx context.Context, q string, limit int) (*SearchResult, error) {
	v := url.Values{"q": {q}}
	setNumber(v, "limit", limit)
	var out SearchResult
	_, err := c.call(ctx, http.MethodGet, "/search", v, nil, &out)
	return &out, err
}

// QueueStatus is a queue with its counts, as GET /api/v1/status/queues
// gives it.
type QueueStatus struct {
	Name       string    `json:"name"`
	CreatedAt  time.Time `json:"createdAt"`
	Partitions int       `json:"partitions"`
	Messages   struct {
		Total   int64 `json:"total"`
		Pending int64 `json:"pending"` // the most any group has not settled
	} `json:"messages"`
	DeadLetters int64  `json:"deadLetters"`
	Holds       []Hold `json:"holds"`
}

// QueueStatusList is GET /api/v1/status/queues's answer.
type QueueStatusList struct {
	body
	Queues []QueueStatus `json:"queues"`
}

// QueueStatus lists the queues with their message and dead-letter counts
// and their holds: a summary of the broker's state.
func (c *Client) QueueStatus(ctx context.Context) (*QueueStatusList, error) {
	var out QueueStatusList
	_, err := c.call(ctx, http.MethodGet, "/status/queues", nil, nil, &out)
	return &out, err
}
