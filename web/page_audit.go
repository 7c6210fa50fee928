package web

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

const auditPageSize = 50

// auditActions are the actions the audit page filters by.
var auditActions = []string{broker.AuditReplay, broker.AuditEditReplay, broker.AuditDelete, broker.AuditRestore,
	broker.AuditHold, broker.AuditHoldRelease, broker.AuditJobPause, broker.AuditJobResume, broker.AuditJobCancel, broker.AuditJobFail, broker.AuditJobCanary, broker.AuditExport, broker.AuditDeadLetter,
	broker.AuditDeadLettersExpired, broker.AuditConfigure, broker.AuditQueueDelete, broker.AuditGroupDelete, broker.AuditLogin, broker.AuditLoginFailed, broker.AuditLogout, broker.AuditUser, broker.AuditToken, broker.AuditDemoHistory,
	broker.AuditErrorGroup, broker.AuditNotifyChannel, broker.AuditNotifyChannelDelete, broker.AuditNotifyRule, broker.AuditNotifyRuleDelete, broker.AuditNotifyTest, broker.AuditReveal}

// adminOnlyActions are the audit entries only admins see: failed logins
// (their names and addresses are for whoever looks after the users).
var adminOnlyActions = []string{broker.AuditLoginFailed}

// showAudit renders page 6: who did what, newest first. Failed logins
// are shown to admins only.
func (s *Server) showAudit(c echo.Context) error {
	f := broker.AuditFilter{Action: c.QueryParam("action"), Actor: c.QueryParam("actor"), Queue: c.QueryParam("queue")}
	switch st := c.QueryParam("stream"); st {
	case broker.AuditStreamPeople, broker.AuditStreamAll:
		f.Stream = st
	default:
		return badRequest("stream must be all (the broker's own entries too) or left out")
	}
	if j := c.QueryParam("job"); j != "" {
		id, err := strconv.ParseInt(j, 10, 64)
		if err != nil || id < 1 {
			return badRequest("job must be a job id")
		}
		f.JobID = id
	}
	actions := auditActions
	if v, ok := visitorFrom(c); !ok || !v.user.Role.Allows(RoleAdmin) {
		f.Except = adminOnlyActions
		actions = slices.DeleteFunc(slices.Clone(actions), func(a string) bool { return slices.Contains(adminOnlyActions, a) })
	}
	p := broker.Page{Limit: auditPageSize}
	if a := c.QueryParam("after"); a != "" {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id < 1 {
			return badRequest("after must be an audit entry id")
		}
		p.After = &broker.Cursor{ID: id}
	}
	f.Scope = scopeOf(c.Request().Context())
	entries, err := s.broker.Audit(c.Request().Context(), f, p)
	if err != nil {
		return err
	}
	v := views.AuditList{Page: s.page(c, "Audit", "audit"), Filter: views.AuditFilter{Action: f.Action, Actor: f.Actor, Queue: f.Queue, Broker: f.Stream == broker.AuditStreamAll, JobID: f.JobID}, Actions: actions}
	for _, e := range entries {
		v.Rows = append(v.Rows, views.AuditRow{At: e.At, Actor: e.Actor, Action: e.Action, Queue: e.Queue, Group: e.Group, Count: e.Count, Detail: e.Detail,
			JobURL: jobURL(e.JobID), Broker: e.Broker})
	}
	if len(entries) == auditPageSize {
		q := url.Values{}
		job := ""
		if f.JobID != 0 {
			job = strconv.FormatInt(f.JobID, 10)
		}
		for k, val := range map[string]string{"action": f.Action, "actor": f.Actor, "queue": f.Queue, "stream": f.Stream, "job": job} {
			if val != "" {
				q.Set(k, val)
			}
		}
		q.Set("after", strconv.FormatInt(entries[len(entries)-1].ID, 10))
		v.NextURL = "/audit?" + q.Encode()
	}
	return renderPage(c, http.StatusOK, views.AuditView(v), views.AuditContent(v))
}
