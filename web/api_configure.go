package web

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

type configureRequest struct {
	Queue string `json:"queue"`
	// Options go to the broker as raw JSON values, so that it can name the
	// option whose value has the wrong type.
	Options map[string]json.RawMessage `json:"options"`
}

type configureResponse struct {
	Configured bool        `json:"configured"`
	Queue      string      `json:"queue"`
	Options    optionsView `json:"options"`
}

// optionsView is a queue's options as the API shows them (SPEC.md section 2).
type optionsView struct {
	LeaseTime          int  `json:"leaseTime"`
	RetryLimit         int  `json:"retryLimit"`
	RetryDelay         int  `json:"retryDelay"`
	DeadLetterQueue    bool `json:"deadLetterQueue"`
	DLQAfterMaxRetries bool `json:"dlqAfterMaxRetries"`
}

func newOptionsView(o broker.Options) optionsView {
	return optionsView{
		LeaseTime:          o.LeaseTime,
		RetryLimit:         o.RetryLimit,
		RetryDelay:         o.RetryDelay,
		DeadLetterQueue:    o.DeadLetterQueue,
		DLQAfterMaxRetries: o.DLQAfterMaxRetries,
	}
}

// configureQueue creates a queue or changes the options it names.
func (s *Server) configureQueue(c echo.Context) error {
	var req configureRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	q, err := s.broker.Configure(c.Request().Context(), req.Queue, req.Options, actor(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, configureResponse{Configured: true, Queue: q.Name, Options: newOptionsView(q.Options)})
}
