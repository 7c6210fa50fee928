package web

import (
	"context"
	"time"

	"github.com/labstack/echo/v4"
)

// Routes lists the server's routes, for the route × role table test.
func (s *Server) Routes() []*echo.Route { return s.echo.Routes() }

// OnPasswordCheck has f run as each password check of a login starts;
// set it before the server takes requests.
func (s *Server) OnPasswordCheck(f func()) { s.checkHook = f }

// OnExport has f run after each page an export wrote (end false) and
// once the export has ended and is in the audit (end true, with the rows
// written), with the request's context; set it before the server takes
// requests.
func (s *Server) OnExport(f func(ctx context.Context, end bool, rows int64)) { s.exportHook = f }

// SetBudget makes every request's budget for its reads d, whatever its
// own (a page's 15 s); set it before the server takes requests.
func (s *Server) SetBudget(d time.Duration) { s.budget = d }
