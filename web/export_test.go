package web

import "github.com/labstack/echo/v4"

// Routes lists the server's routes, for the route × role table test.
func (s *Server) Routes() []*echo.Route { return s.echo.Routes() }
