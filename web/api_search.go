package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/views"
)

// searchView is the answer of GET /api/v1/search: what the header's
// search box finds, as JSON.
type searchView struct {
	Query      string          `json:"query"`
	SearchedAs []string        `json:"searchedAs"`
	More       bool            `json:"more"` // more than limit matched
	Matches    []searchHitView `json:"matches"`
}

// searchHitView is one match: a dead letter, or a message that is none
// (consumerGroup, errorLine and failedAt null; groups says where it is).
type searchHitView struct {
	Match         string           `json:"match"`
	DeadLetter    bool             `json:"deadLetter"`
	ID            string           `json:"id"`
	Queue         string           `json:"queue"`
	Partition     string           `json:"partition"`
	PartitionID   string           `json:"partitionId"`
	ConsumerGroup *string          `json:"consumerGroup"`
	TransactionID string           `json:"transactionId"`
	TraceID       *string          `json:"traceId"`
	ErrorLine     *string          `json:"errorLine"`
	RetryCount    int              `json:"retryCount"`
	CreatedAt     timestamp        `json:"createdAt"`
	FailedAt      timestamp        `json:"failedAt"`
	Groups        []groupPlaceView `json:"groups,omitempty"`
	ReplayedAs    *string          `json:"replayedAs,omitempty"`
}

type groupPlaceView struct {
	ConsumerGroup string `json:"consumerGroup"`
	State         string `json:"state"` // settled, leased, retrying, pending
	Retries       int    `json:"retries"`
}

// search answers GET /api/v1/search?q=…&limit=… (limit 1-1000, 50 when
// absent).
func (s *Server) search(c echo.Context) error {
	limit, err := queryInt(c, "limit", searchLimit)
	if err != nil {
		return err
	}
	res, err := s.broker.SearchIn(c.Request().Context(), c.QueryParam("q"), limit, scopeOf(c.Request().Context()))
	if err != nil {
		return err
	}
	if res.Hits, err = s.masksOf(c).searchHits(res.Hits); err != nil {
		return err
	}
	out := searchView{Query: res.Query, SearchedAs: res.As, More: res.More, Matches: make([]searchHitView, 0, len(res.Hits))}
	for _, h := range res.Hits {
		v := searchHitView{
			Match: h.Match, DeadLetter: h.IsDeadLetter, ID: h.MessageID(), Queue: h.Queue, Partition: h.Partition,
			PartitionID: h.PartitionKey, ConsumerGroup: optional(h.Group), TransactionID: h.TransactionID, TraceID: optional(h.TraceID),
			RetryCount: h.RetryCount, CreatedAt: timestamp(h.CreatedAt), FailedAt: timestamp(h.FailedAt), ReplayedAs: optional(h.ReplayedAs),
		}
		if h.IsDeadLetter {
			line, _, _ := strings.Cut(h.Error, "\n")
			line = views.Cut(line, 500)
			v.ErrorLine = &line
		} else {
			v.Groups = make([]groupPlaceView, 0, len(h.Places))
			for _, p := range h.Places {
				v.Groups = append(v.Groups, groupPlaceView{ConsumerGroup: p.Group, State: p.State, Retries: p.Retries})
			}
		}
		out.Matches = append(out.Matches, v)
	}
	return writeJSON(c, http.StatusOK, out)
}
