package client

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// Hold stops the deliveries of a queue, or of one consumer group of it
// (SPEC section 6).
type Hold struct {
	ID            int64     `json:"id"`
	Queue         string    `json:"queue"`
	ConsumerGroup *string   `json:"consumerGroup"` // nil: the whole queue
	Kind          string    `json:"kind"`          // manual or breaker
	Reason        string    `json:"reason"`
	By            string    `json:"by"`
	Since         time.Time `json:"since"`
	Waiting       int64     `json:"waiting"`
}

// HoldList is GET /api/v1/holds's answer.
type HoldList struct {
	body
	Holds []Hold `json:"holds"`
}

// Holds lists the holds, of queue and group when not "".
func (c *Client) Holds(ctx context.Context, queue, group string) (*HoldList, error) {
	q := params("queue", queue, "consumerGroup", group)
	var out HoldList
	_, err := c.call(ctx, http.MethodGet, "/holds", q, nil, &out)
	return &out, err
}

// HoldRequest is POST /api/v1/holds's body.
type HoldRequest struct {
	Queue         string `json:"queue"`
	ConsumerGroup string `json:"consumerGroup,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// HoldAnswer is a hold made (Existing false) or found there already.
type HoldAnswer struct {
	body
	Hold
	Existing bool `json:"existing"`
}

// Hold holds a queue, or one consumer group of it. Holding what is held
// already is safe: the answer is the hold there, Existing.
func (c *Client) Hold(ctx context.Context, r HoldRequest) (*HoldAnswer, error) {
	var out HoldAnswer
	_, err := c.call(ctx, http.MethodPost, "/holds", nil, r, &out)
	return &out, err
}

// ReleaseAnswer is a released hold.
type ReleaseAnswer struct {
	body
	Released bool `json:"released"`
	Hold     Hold `json:"hold"`
}

// Release releases a hold; one not there (released already) is an
// *Error with status 404.
func (c *Client) Release(ctx context.Context, id int64) (*ReleaseAnswer, error) {
	var out ReleaseAnswer
	_, err := c.call(ctx, http.MethodDelete, "/holds/"+strconv.FormatInt(id, 10), nil, nil, &out)
	return &out, err
}
