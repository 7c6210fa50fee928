package web

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
)

// Masking (broker/mask.go; DASHBOARD.md "Who sees what"): every payload a
// page, an API answer, a search, a diff, an export or an archive line
// shows goes through a request's masks, for every role alike: a value at
// a queue's maskPaths reads •••. A role at or above the queue's
// maskRevealRole may reveal one dead letter (?reveal=true on the API, the
// Reveal button on its page), which is audited, and export with
// revealed=true (admins, audited with the export); a role below it may
// not search or filter on the masked fields (Masks.CheckQuery). Pops and
// replays are the consumers' and carry the real payload.

// requestMasks are the masks one request applies, read once (lazily: a
// request that shows no payload reads none).
type requestMasks struct {
	ctx    context.Context
	broker *broker.Broker
	role   Role
	masks  broker.Masks
	err    error
	read   bool
}

// masksOf returns the request's masks.
func (s *Server) masksOf(c echo.Context) *requestMasks {
	ctx := c.Request().Context()
	p, ok := principalFrom(ctx)
	if !ok {
		p = anonymous
	}
	return &requestMasks{ctx: ctx, broker: s.broker, role: p.Role}
}

func (m *requestMasks) load() (broker.Masks, error) {
	if !m.read {
		m.masks, m.err = m.broker.Masks(m.ctx)
		m.read = true
	}
	return m.masks, m.err
}

// payload returns queue's payload as shown: masked. When the masks cannot
// be read the payload is masked whole (the safe side) and the error kept
// for check.
func (m *requestMasks) payload(queue string, p []byte) []byte {
	ms, err := m.load()
	if err != nil {
		return []byte(`"` + broker.MaskedValue + `"`)
	}
	return ms.Payload(queue, p)
}

// check returns the error of reading the masks, if any: a handler calls
// it before writing what it masked.
func (m *requestMasks) check() error {
	_, err := m.load()
	return err
}

// query refuses a search or field filter on a field masked to the
// request's principal (400, naming the field).
func (m *requestMasks) query(q broker.DLQQuery) error {
	if q.Text == "" && len(q.Fields) == 0 {
		return nil
	}
	ms, err := m.load()
	if err != nil {
		return err
	}
	return ms.CheckQuery(q, m.role)
}

// of returns queue's mask, false when it masks nothing (or the masks
// cannot be read: check says so).
func (m *requestMasks) of(queue string) (broker.QueueMask, bool) {
	ms, err := m.load()
	qm, ok := ms[queue]
	return qm, err == nil && ok
}

// masking reports whether queue masks anything.
func (m *requestMasks) masking(queue string) bool {
	ms, err := m.load()
	_, ok := ms[queue]
	return err == nil && ok
}

// reveal decides a request to reveal queue's masked fields: nil paths
// when the queue masks nothing, a 403 when the principal's role is below
// its maskRevealRole.
func (m *requestMasks) reveal(queue string) ([]string, error) {
	ms, err := m.load()
	if err != nil {
		return nil, err
	}
	qm, ok := ms[queue]
	if !ok {
		return nil, nil
	}
	if !m.role.Allows(qm.RevealRole) {
		return nil, &apiError{status: http.StatusForbidden, message: "not allowed: revealing the masked fields of queue " + queue + " needs the " + string(qm.RevealRole) + " role"}
	}
	return qm.Paths, nil
}

// revealParam reads a reveal flag (?reveal=true): false when absent.
func revealParam(c echo.Context, name string) (bool, error) {
	v := c.QueryParam(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("query parameter %s must be true or false", name)
	}
	return b, nil
}

// searchHits drops the hits found by words (broker.MatchText) in queues
// whose masked fields are masked to the principal: the words may be a
// masked value's, and a hit would tell it is there. Hits by id, short
// id, transaction id or trace id stay.
func (m *requestMasks) searchHits(hits []broker.SearchHit) ([]broker.SearchHit, error) {
	ms, err := m.load()
	if err != nil {
		return nil, err
	}
	out := hits[:0:0]
	for _, h := range hits {
		if h.Match == broker.MatchText && ms.MaskedFor(h.Queue, m.role) {
			continue
		}
		out = append(out, h)
	}
	return out, nil
}

// restore returns an edit of queue's payload (shown masked) with the
// masked values left as ••• put back to original's (Mask.Restore): an
// edit-and-replay keeps what the editor could not see.
func (m *requestMasks) restore(queue string, edited, original []byte) ([]byte, error) {
	ms, err := m.load()
	if err != nil {
		return nil, err
	}
	qm, ok := ms[queue]
	if !ok {
		return edited, nil
	}
	out, _ := qm.Restore(edited, original)
	return out, nil
}
