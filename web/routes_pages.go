package web

import (
	"io/fs"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/static"
)

// pageRoutes lists the dashboard's pages and actions. Pages are for
// viewers; replay and delete for operators.
func (s *Server) pageRoutes() {
	e := s.echo
	viewer, operator := s.requirePage(RoleViewer), s.requirePage(RoleOperator)

	e.GET("/static/*", echo.WrapHandler(staticHandler()))
	if s.metricsPublic {
		e.GET("/metrics", s.metrics.handler())
	} else {
		e.GET("/metrics", s.metrics.handler(), s.authenticate, s.require(RoleViewer))
	}

	e.GET("/", s.showOverview, viewer)
	e.GET("/queues/:queue", s.showQueuePage, viewer)
	e.POST("/queues/:queue/holds", s.holdPage, operator)
	e.POST("/holds/:id/release", s.releasePage, operator)
	e.GET("/queues/:queue/dead-letters", s.showDeadLetters, viewer)
	e.GET("/queues/:queue/dead-letters/confirm", s.confirmBulk, operator)
	e.GET("/queues/:queue/dead-letters/export", s.exportPage, operator) // personal data: operators and admins
	e.POST("/queues/:queue/dead-letters/replay", s.replayBulk, operator)
	e.POST("/queues/:queue/dead-letters/delete", s.deleteBulk, operator)
	e.GET("/queues/:queue/dead-letters/:id", s.showDeadLetterPage, viewer)
	e.GET("/queues/:queue/dead-letters/:id/payload", s.downloadPayload, viewer)
	e.GET("/queues/:queue/dead-letters/:id/error", s.downloadError, viewer)
	e.POST("/queues/:queue/dead-letters/:id/reveal", s.revealDeadLetter, viewer) // the queue's maskRevealRole: checked there
	e.POST("/queues/:queue/dead-letters/:id/replay", s.replayOne, operator)
	e.GET("/queues/:queue/dead-letters/:id/edit", s.showEdit, operator)
	e.POST("/queues/:queue/dead-letters/:id/edit/preview", s.previewEdit, operator)
	e.POST("/queues/:queue/dead-letters/:id/edit", s.replayEdit, operator)
	e.POST("/queues/:queue/dead-letters/:id/delete", s.deleteOne, operator)
	e.POST("/queues/:queue/dead-letters/:id/restore", s.restoreOne, operator)
	e.GET("/charts", s.showCharts, viewer)
	e.GET("/charts/queues", s.suggestQueues, viewer)
	e.GET("/admin/thresholds", s.showThresholds, s.requirePage(RoleAdmin))
	e.POST("/admin/thresholds", s.saveThresholds, s.requirePage(RoleAdmin))
	e.GET("/audit", s.showAudit, viewer)
	e.GET("/jobs", s.showJobs, viewer)
	e.GET("/jobs/:id", s.showJob, viewer)
	e.GET("/jobs/:id/progress", s.showJobProgress, viewer)
	e.POST("/jobs/:id/pause", s.pauseJobPage, operator)
	e.POST("/jobs/:id/resume", s.resumeJobPage, operator)
	e.POST("/jobs/:id/cancel", s.cancelJobPage, operator)
	e.POST("/jobs/:id/undo", s.undoJobPage, operator)
	e.GET("/search", s.showSearch, viewer)
	e.GET("/error-groups", s.showErrorGroupsPage, viewer)
	e.GET("/error-groups/:id", s.showErrorGroupPage, viewer)
	e.POST("/error-groups/:id/state", s.setErrorGroupStatePage, operator)
	s.liveRoutes(viewer)
}

// staticHandler serves the embedded files. Their names carry no version,
// except the vendored ones, so they are cached briefly and revalidated.
// Only files: a folder (/static/, /static/vendor/) is a 404, never a
// listing.
func staticHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/static/")
		if !ok || !fs.ValidPath(name) || strings.HasSuffix(name, ".go") {
			http.NotFound(w, r)
			return
		}
		if st, err := fs.Stat(static.FS, name); err != nil || st.IsDir() {
			http.NotFound(w, r)
			return
		}
		if strings.HasPrefix(name, "vendor/") {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "public, max-age=300")
		}
		http.ServeFileFS(w, r, static.FS, name)
	})
}
