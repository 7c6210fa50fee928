package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Queen's maintenance mode (broker/maintenance.go): Queen's push scope
// writes pushes to files while its database is serviced; here pushes are
// stored as usual and either scope holds every delivery. The answers keep
// Queen's fields; those of its file buffer say what is true here: no
// file, nothing failed, the database healthy (it answered), and the
// messages "buffered" are those pushed since the push scope went on,
// waiting in the database for it to end.

// maintenanceRequest is Queen's body: {"enabled": true|false}.
type maintenanceRequest struct {
	Enabled *bool `json:"enabled"`
}

// maintenanceScope is one scope's switch and its last change (Lazarus's):
// by and since are null when it was never turned on.
type maintenanceScope struct {
	On    bool      `json:"on"`
	By    *string   `json:"by"`
	Since timestamp `json:"since"`
}

func maintenanceScopeOf(s broker.MaintenanceState) maintenanceScope {
	return maintenanceScope{On: s.On, By: optional(s.By), Since: timestamp(s.Since)}
}

// bufferStats is Queen's file buffer's statistics: Lazarus has none.
type bufferStats struct {
	PendingCount int64       `json:"pendingCount"`
	FailedCount  int64       `json:"failedCount"`
	DBHealthy    bool        `json:"dbHealthy"`
	FailedFiles  failedFiles `json:"failedFiles"`
}

type failedFiles struct {
	Count         int64   `json:"count"`
	TotalBytes    int64   `json:"totalBytes"`
	TotalMB       float64 `json:"totalMB"`
	FailoverCount int64   `json:"failoverCount"`
	QoS0Count     int64   `json:"qos0Count"`
}

// maintenanceResponse is Queen's answer to GET /system/maintenance, with
// each scope's who and since.
type maintenanceResponse struct {
	MaintenanceMode    bool             `json:"maintenanceMode"`
	PopMaintenanceMode bool             `json:"popMaintenanceMode"`
	BufferedMessages   int64            `json:"bufferedMessages"`
	BufferHealthy      bool             `json:"bufferHealthy"`
	BufferStats        bufferStats      `json:"bufferStats"`
	Push               maintenanceScope `json:"push"`
	Pop                maintenanceScope `json:"pop"`
	Message            string           `json:"message,omitempty"` // POST's
}

func maintenanceAnswer(st broker.MaintenanceStatus) maintenanceResponse {
	return maintenanceResponse{MaintenanceMode: st.Push.On, PopMaintenanceMode: st.Pop.On, BufferedMessages: st.Buffered, BufferHealthy: true,
		BufferStats: bufferStats{PendingCount: st.Buffered, DBHealthy: true}, Push: maintenanceScopeOf(st.Push), Pop: maintenanceScopeOf(st.Pop)}
}

// popMaintenanceResponse is Queen's answer about the pop scope.
type popMaintenanceResponse struct {
	PopMaintenanceMode bool             `json:"popMaintenanceMode"`
	Message            string           `json:"message"`
	Pop                maintenanceScope `json:"pop"`
}

func popMaintenanceAnswer(m broker.MaintenanceMode, set bool) popMaintenanceResponse {
	msg := "Pop maintenance mode is OFF. Normal operation."
	switch {
	case set && m.Pop.On:
		msg = "Pop maintenance mode ENABLED. Pops deliver nothing until it is disabled; pushes are stored as usual."
	case set:
		msg = "Pop maintenance mode DISABLED."
	case m.Pop.On:
		msg = "Pop maintenance mode is ON. Pops deliver nothing; pushes are stored as usual."
	}
	if !m.Pop.On && m.Push.On {
		msg += " Push maintenance mode is on: pops still deliver nothing."
	}
	return popMaintenanceResponse{PopMaintenanceMode: m.Pop.On, Message: msg, Pop: maintenanceScopeOf(m.Pop)}
}

// showMaintenance answers Queen's GET /system/maintenance: both scopes,
// and the messages pushed since the push scope went on.
func (s *Server) showMaintenance(c echo.Context) error {
	st, err := s.broker.MaintenanceStatus(c.Request().Context())
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, maintenanceAnswer(st))
}

// setMaintenance turns the push scope on or off (Queen's POST
// /system/maintenance).
func (s *Server) setMaintenance(c echo.Context) error {
	on, err := maintenanceSwitch(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := s.broker.SetMaintenance(ctx, broker.MaintenancePush, on, actor(c)); err != nil {
		return err
	}
	st, err := s.broker.MaintenanceStatus(ctx)
	if err != nil {
		return err
	}
	out := maintenanceAnswer(st)
	switch {
	case st.Push.On:
		out.Message = "Maintenance mode ENABLED. Pushes are stored as usual; pops deliver nothing until it is disabled."
	case st.Pop.On:
		out.Message = "Maintenance mode DISABLED. Pop maintenance mode is still on: pops deliver nothing until it is disabled too."
	default:
		out.Message = "Maintenance mode DISABLED. Pops deliver again, the messages pushed meanwhile included."
	}
	return writeJSON(c, http.StatusOK, out)
}

// showPopMaintenance answers Queen's GET /system/maintenance/pop.
func (s *Server) showPopMaintenance(c echo.Context) error {
	m, err := s.broker.Maintenance(c.Request().Context())
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, popMaintenanceAnswer(m, false))
}

// setPopMaintenance turns the pop scope on or off (Queen's POST
// /system/maintenance/pop).
func (s *Server) setPopMaintenance(c echo.Context) error {
	on, err := maintenanceSwitch(c)
	if err != nil {
		return err
	}
	m, err := s.broker.SetMaintenance(c.Request().Context(), broker.MaintenancePop, on, actor(c))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, popMaintenanceAnswer(m, true))
}

// maintenanceSwitch reads {"enabled": bool}: anything else is Queen's
// 400.
func maintenanceSwitch(c echo.Context) (bool, error) {
	var req maintenanceRequest
	if err := decodeJSON(c, &req); err != nil {
		return false, err
	}
	if req.Enabled == nil {
		return false, badRequest("enabled (boolean) is required")
	}
	return *req.Enabled, nil
}
