package web

import "github.com/labstack/echo/v4"

// Routes lists the server's routes, for the route × role table test.
func (s *Server) Routes() []*echo.Route { return s.echo.Routes() }

// OnPasswordCheck has f run as each password check of a login starts;
// set it before the server takes requests.
func (s *Server) OnPasswordCheck(f func()) { s.checkHook = f }
