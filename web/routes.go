package web

// apiPrefix starts every path of the JSON API.
const apiPrefix = "/api/v1"

// routes lists every route of the server (the dashboard's pages are in
// routes_pages.go). The role after each route is the least a principal
// needs to call it (see auth.go and page_auth.go).
func (s *Server) routes() {
	e := s.echo
	e.GET("/health", s.showHealth)

	// The API's middleware is global, limited to its prefix, rather than the
	// group's: echo answers unknown paths of a group with middleware 404
	// where 405 is due.
	s.use(underPrefix(apiPrefix, s.limitBody), underPrefix(apiPrefix, s.authenticate))
	// A path no route serves is answered here (notfound.go): a JSON 404
	// (under the API, to a caller with a valid token), never the CSRF
	// check's 403 below.
	s.use(s.unknownRoute)
	api := e.Group(apiPrefix)
	viewer, operator, admin := s.require(RoleViewer), s.require(RoleOperator), s.require(RoleAdmin)

	api.POST("/configure", s.configureQueue, admin)
	api.GET("/resources/queues", s.listQueues, viewer)
	api.GET("/resources/queues/:queue", s.showQueue, viewer)
	api.DELETE("/resources/queues/:queue", s.deleteQueue, admin)

	api.POST("/push", s.pushMessages, operator)
	api.GET("/pop/queue/:queue", s.popMessages, operator)
	api.GET("/pop/queue/:queue/partition/:partition", s.popMessages, operator)
	api.GET("/pop", s.popLabeled, operator)
	api.POST("/traces", s.recordTrace, operator)
	api.POST("/ack", s.ackMessage, operator)
	api.POST("/ack/batch", s.ackMessages, operator)
	api.POST("/lease/:leaseId/extend", s.extendLease, operator)
	api.POST("/transaction", s.runTransaction, operator)

	api.POST("/stats/refresh", s.refreshStats, operator)
	api.GET("/status/queues", s.statusQueues, viewer)
	api.GET("/status/queues/:queue", s.statusQueue, viewer)

	api.GET("/search", s.search, viewer)
	api.GET("/dlq", s.listDeadLetters, viewer)
	api.GET("/dlq/:id", s.showDeadLetter, viewer)
	api.GET("/dlq/export", s.exportAPI, operator) // payloads hold personal data: operators and admins
	api.POST("/dlq/:id/replay", s.replayDeadLetter, operator)
	api.DELETE("/dlq/:id", s.deleteDeadLetter, operator)
	api.POST("/dlq/replay", s.replayDeadLetters, operator)
	api.POST("/dlq/delete", s.deleteDeadLetters, operator)
	api.POST("/messages/:partitionId/:transactionId/retry", s.retryMessage, operator)
	api.GET("/messages", s.listMessages, viewer)
	api.GET("/messages/:partitionId/:transactionId", s.showMessage, viewer)
	api.DELETE("/messages/:partitionId/:transactionId", s.deleteMessage, operator)
	api.DELETE("/consumer-groups/:group", s.deleteGroup, operator)
	api.DELETE("/consumer-groups/:group/queues/:queue", s.deleteGroup, operator)
	api.GET("/consumer-groups", s.listGroups, viewer)
	api.GET("/consumer-groups/lagging", s.listLagging, viewer)
	api.GET("/consumer-groups/:group", s.showGroup, viewer)
	api.POST("/consumer-groups/:group/queues/:queue/seek", s.seekGroup, operator)
	api.POST("/consumer-groups/:group/queues/:queue/partitions/:partition/seek", s.seekPartition, operator)
	api.POST("/consumer-groups/:group/subscription", s.moveSubscription, operator)
	api.GET("/system/maintenance", s.showMaintenance, viewer)
	api.POST("/system/maintenance", s.setMaintenance, operator)
	api.GET("/system/maintenance/pop", s.showPopMaintenance, viewer)
	api.POST("/system/maintenance/pop", s.setPopMaintenance, operator)
	api.POST("/holds", s.createHold, operator)
	api.GET("/holds", s.listHolds, viewer)
	api.DELETE("/holds/:id", s.releaseHold, operator)
	api.GET("/error-groups", s.listErrorGroups, viewer)
	api.GET("/error-groups/:fingerprint", s.showErrorGroup, viewer)
	api.POST("/error-groups/:fingerprint/state", s.setErrorGroupState, operator)
	api.GET("/notify/channels", s.listChannels, admin, s.everyQueueAdmin)
	api.POST("/notify/channels", s.createChannel, admin, s.everyQueueAdmin)
	api.DELETE("/notify/channels/:id", s.deleteChannel, admin, s.everyQueueAdmin)
	api.POST("/notify/channels/:id/test", s.testChannel, admin, s.everyQueueAdmin)
	api.GET("/notify/rules", s.listRules, admin, s.everyQueueAdmin)
	api.POST("/notify/rules", s.createRule, admin, s.everyQueueAdmin)
	api.DELETE("/notify/rules/:id", s.deleteRule, admin, s.everyQueueAdmin)
	api.GET("/notify/deliveries", s.listDeliveries, admin, s.everyQueueAdmin)
	api.GET("/jobs", s.listJobs, viewer)
	api.GET("/jobs/:id", s.showJobAPI, viewer)
	api.POST("/jobs/:id/pause", s.pauseJobAPI, operator)
	api.POST("/jobs/:id/resume", s.resumeJobAPI, operator)
	api.POST("/jobs/:id/cancel", s.cancelJobAPI, operator)
	api.POST("/jobs/:id/undo", s.undoJobAPI, operator)
	api.GET("/whoami", s.whoami, viewer)

	// The Model Context Protocol for agents (mcp.go), behind the API's
	// tokens: any role may connect, and is offered the tools of its role.
	e.POST("/mcp", s.mcpHandler(), s.limitBody, s.authenticate, viewer)

	// The dashboard: sessions (session.go) and CSRF protection (csrf.go)
	// for every path but the API's, the health check and the static files;
	// each page states the least role it needs with requirePage.
	s.use(s.loadSession, s.csrf())
	e.GET("/login", s.showLogin)
	e.POST("/login", s.login)
	e.POST("/logout", s.logout)
	e.GET(ssoStartPath, s.ssoStart)
	e.GET(ssoCallbackPath, s.ssoCallback)

	adminPage := s.requirePage(RoleAdmin)
	e.GET("/admin/users", s.showUsers, adminPage)
	e.POST("/admin/users", s.createUser, adminPage, s.everyQueueAdmin)
	e.POST("/admin/users/:id/role", s.setUserRole, adminPage, s.everyQueueAdmin)
	e.POST("/admin/users/:id/queues", s.setUserQueues, adminPage, s.everyQueueAdmin)
	e.POST("/admin/users/:id/delete", s.deleteUser, adminPage, s.everyQueueAdmin)
	e.POST("/admin/tokens", s.createToken, adminPage, s.everyQueueAdmin)
	e.POST("/admin/users/:id/tokens/:token/revoke", s.revokeToken, adminPage, s.everyQueueAdmin)
	e.GET("/admin/notify", s.showNotify, adminPage, s.everyQueueAdmin)
	e.POST("/admin/notify/channels", s.createChannelPage, adminPage, s.everyQueueAdmin)
	e.POST("/admin/notify/channels/:id/delete", s.deleteChannelPage, adminPage, s.everyQueueAdmin)
	e.POST("/admin/notify/channels/:id/test", s.testChannelPage, adminPage, s.everyQueueAdmin)
	e.POST("/admin/notify/rules", s.createRulePage, adminPage, s.everyQueueAdmin)
	e.POST("/admin/notify/rules/:id/delete", s.deleteRulePage, adminPage, s.everyQueueAdmin)
	e.GET("/admin/notify/deliveries", s.showDeliveries, adminPage, s.everyQueueAdmin)

	s.pageRoutes()
}
