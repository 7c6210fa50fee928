package web

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// The dashboard's holds (SPEC section 6): Hold on a page of the queue
// (POST /queues/:queue/holds, its dialog asking why) and Release on a
// hold's banner (POST /holds/:id/release). Each is one broker call, and
// leads back to the page it came from, which shows the banner (or no
// longer does) and what was done.

// holdPage answers POST /queues/:queue/holds: the form's group ("" the
// whole queue) and reason.
func (s *Server) holdPage(c echo.Context) error {
	queue, err := pathParam(c, "queue")
	if err != nil {
		return err
	}
	group, reason := strings.TrimSpace(c.FormValue("group")), strings.TrimSpace(c.FormValue("reason"))
	if reason == "" {
		return badRequest("say why deliveries are held: the banner shows it to everyone")
	}
	h, created, err := s.broker.Hold(c.Request().Context(), broker.HoldRequest{Queue: queue, Group: group, Reason: reason, Actor: s.pageActor(c)})
	if err != nil {
		return err
	}
	what := holdWhat(h)
	text := fmt.Sprintf("Held %s: its pops deliver nothing until the hold is released (%s).", what, waitingWords(h.Waiting))
	if !created {
		text = fmt.Sprintf("%s was held already, by %s: nothing changed.", upperFirst(what), h.Actor)
	}
	return s.holdDone(c, queueURL(queue), views.Flash{Kind: "ok", Text: text})
}

// releasePage answers POST /holds/:id/release.
func (s *Server) releasePage(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return &apiError{status: http.StatusNotFound, message: "no such hold"}
	}
	h, err := s.broker.Release(c.Request().Context(), id, s.pageActor(c))
	if err != nil {
		return err
	}
	text := fmt.Sprintf("Released %s: %s delivered again.", holdWhat(h), waitingWords(h.Waiting))
	return s.holdDone(c, queueURL(h.Queue), views.Flash{Kind: "ok", Text: text})
}

// holdDone leads back to the page the form came from (its next field,
// a path of this site; else fallback), with the message: for htmx a
// full load of that page (HX-Redirect), whose banners are then true; for
// a plain form a 303.
func (s *Server) holdDone(c echo.Context, fallback string, f views.Flash) error {
	if err := s.setFlash(c, f, ""); err != nil {
		return err
	}
	next := localNext(c.FormValue("next"), fallback)
	if isFragment(c) {
		c.Response().Header().Set("HX-Redirect", next)
		return c.NoContent(http.StatusOK)
	}
	return c.Redirect(http.StatusSeeOther, next)
}

func holdWhat(h broker.Hold) string { return views.HoldWhat(h.Queue, h.Group) }

func waitingWords(n int64) string { return strings.ToLower(views.WaitingText(n)) }

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// queueHolds are the holds of a queue as the pages show them: for
// operators with their Release. A failed read leaves the banners out,
// logged: the page's own reads say what is wrong.
func (s *Server) queueHolds(ctx context.Context, c echo.Context, queue string) []views.HoldNote {
	hs, err := s.broker.Holds(ctx, broker.HoldFilter{Queue: queue})
	if err != nil {
		s.log.WarnContext(ctx, "holds for the banner", "queue", queue, "err", err)
		return nil
	}
	return s.holdNotes(c, hs)
}

// holdNotes are holds for the pages.
func (s *Server) holdNotes(c echo.Context, hs []broker.Hold) []views.HoldNote {
	operate := s.viewSession(c).CanOperate
	out := make([]views.HoldNote, 0, len(hs))
	for _, h := range hs {
		n := views.HoldNote{ID: h.ID, Queue: h.Queue, Group: h.Group, Breaker: h.Kind == broker.HoldBreaker, Reason: h.Reason, By: h.Actor,
			Since: h.Since, Waiting: h.Waiting, ProbeAt: h.ProbeAt, Probes: h.Probes}
		if operate {
			n.ReleaseURL = "/holds/" + strconv.FormatInt(h.ID, 10) + "/release"
		}
		out = append(out, n)
	}
	return out
}

// holdsOfGroup keeps the holds of the whole queue and of group ("": of
// every group).
func holdsOfGroup(hs []views.HoldNote, group string) []views.HoldNote {
	if group == "" {
		return hs
	}
	var out []views.HoldNote
	for _, h := range hs {
		if h.Group == "" || h.Group == group {
			out = append(out, h)
		}
	}
	return out
}

// holdForm is a page's Hold dialog: for operators only, posting to the
// page's queue and leading back to back.
func (s *Server) holdForm(c echo.Context, queue, back string, groups []string) views.HoldForm {
	vs := s.viewSession(c)
	if !vs.CanOperate {
		return views.HoldForm{}
	}
	return views.HoldForm{PostURL: queueURL(queue) + "/holds", Queue: queue, Back: back, Groups: groups, CSRFToken: vs.CSRFToken}
}

// withGroup is groups with group among them ("" adds none).
func withGroup(groups []string, group string) []string {
	if group == "" || slices.Contains(groups, group) {
		return groups
	}
	return append(slices.Clone(groups), group)
}
