package web

// apiPrefix starts every path of the JSON API.
const apiPrefix = "/api/v1"

// routes lists every route of the server. The role after each route is the
// least a principal needs to call it (see auth.go).
func (s *Server) routes() {
	e := s.echo
	e.GET("/health", s.showHealth)

	// The API's middleware is global, limited to its prefix, rather than the
	// group's: echo answers unknown paths of a group with middleware 404
	// where 405 is due.
	e.Use(underPrefix(apiPrefix, s.limitBody), underPrefix(apiPrefix, s.authenticate))
	api := e.Group(apiPrefix)
	viewer, operator, admin := s.require(RoleViewer), s.require(RoleOperator), s.require(RoleAdmin)

	api.POST("/configure", s.configureQueue, admin)
	api.GET("/resources/queues", s.listQueues, viewer)
	api.GET("/resources/queues/:queue", s.showQueue, viewer)
	api.DELETE("/resources/queues/:queue", s.deleteQueue, admin)

	api.POST("/push", s.pushMessages, operator)
	api.GET("/pop/queue/:queue", s.popMessages, operator)
	api.GET("/pop/queue/:queue/partition/:partition", s.popMessages, operator)
	api.POST("/ack", s.ackMessage, operator)
	api.POST("/ack/batch", s.ackMessages, operator)
	api.POST("/lease/:leaseId/extend", s.extendLease, operator)
	api.POST("/transaction", s.runTransaction, operator)

	api.GET("/dlq", s.listDeadLetters, viewer)
	api.GET("/dlq/:id", s.showDeadLetter, viewer)
	api.POST("/dlq/:id/replay", s.replayDeadLetter, operator)
	api.DELETE("/dlq/:id", s.deleteDeadLetter, operator)
	api.POST("/dlq/replay", s.replayDeadLetters, operator)
	api.POST("/dlq/delete", s.deleteDeadLetters, operator)
	api.POST("/messages/:partitionId/:transactionId/retry", s.retryMessage, operator)

	s.pageRoutes()
}
