package web

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

type configureRequest struct {
	Queue string `json:"queue"`
	// Namespace and Task are Queen's labels of a queue; null (what Queen's
	// clients send when they have none) or absent leaves them as they are.
	Namespace *string `json:"namespace"`
	Task      *string `json:"task"`
	// Options go to the broker as raw JSON values, so that it can name the
	// option whose value has the wrong type.
	Options map[string]json.RawMessage `json:"options"`
}

type configureResponse struct {
	Configured bool        `json:"configured"`
	Queue      string      `json:"queue"`
	Namespace  *string     `json:"namespace"`
	Task       *string     `json:"task"`
	Options    optionsView `json:"options"`
	// NotEnforced names the options the queue keeps without enforcing
	// them (SPEC.md section 2): never accepted silently.
	NotEnforced []string `json:"notEnforced"`
}

// optionsView is a queue's options as the API shows them (SPEC.md section
// 2; broker.Options.MarshalJSON): those Lazarus enforces, then those it
// keeps without enforcing, with the values they were given.
type optionsView = broker.Options

func newOptionsView(o broker.Options) optionsView { return o }

// notEnforced is the queue's not-enforced options, [] when none.
func notEnforced(o broker.Options) []string {
	if n := o.NotEnforced(); len(n) > 0 {
		return n
	}
	return []string{}
}

// configureQueue creates a queue or changes the options it names, and its
// namespace and task when given.
func (s *Server) configureQueue(c echo.Context) error {
	var req configureRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	q, err := s.broker.ConfigureLabeled(c.Request().Context(), req.Queue, broker.Labels{Namespace: req.Namespace, Task: req.Task}, req.Options, actor(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, configureResponse{Configured: true, Queue: q.Name, Namespace: optional(q.Namespace), Task: optional(q.Task),
		Options: newOptionsView(q.Options), NotEnforced: notEnforced(q.Options)})
}
