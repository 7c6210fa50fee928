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
	// option whose value has the wrong type; null puts one back to its
	// default.
	Options map[string]json.RawMessage `json:"options"`
	// Mode is "merge" (the default: what is not named keeps its value) or
	// "replace" (what is not named goes back to its default, namespace and
	// task included: what Queen's configure always does).
	Mode *string `json:"mode"`
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
// namespace and task when given; with "mode":"replace" the others go back
// to their defaults.
func (s *Server) configureQueue(c echo.Context) error {
	var req configureRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	replace := false
	if req.Mode != nil {
		switch *req.Mode {
		case "merge":
		case "replace":
			replace = true
		default:
			return badRequest("mode must be \"merge\" or \"replace\", got %q", truncate(*req.Mode, 32))
		}
	}
	if err := checkQueue(c, req.Queue); err != nil {
		return err // a queue out of scope is neither shown nor made
	}
	q, err := s.broker.ConfigureWith(c.Request().Context(), broker.ConfigureParams{Queue: req.Queue,
		Labels: broker.Labels{Namespace: req.Namespace, Task: req.Task}, Options: req.Options, Replace: replace, Actor: actor(c)})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, configureResponse{Configured: true, Queue: q.Name, Namespace: optional(q.Namespace), Task: optional(q.Task),
		Options: newOptionsView(q.Options), NotEnforced: notEnforced(q.Options)})
}
