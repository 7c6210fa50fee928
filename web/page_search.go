package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// searchLimit is how many matches the search page lists.
const searchLimit = 50

// searchURL is the search page of a text.
func searchURL(q string) string { return "/search?" + url.Values{"q": {q}}.Encode() }

// showSearch answers the header's search box (GET /search?q=…): one dead
// letter found opens its page (303), one message that is no dead letter
// is shown with where it is, several are listed, none says so. Text that
// cannot be searched is a 400 on the same page, the box still holding it.
func (s *Server) showSearch(c echo.Context) error {
	q := c.QueryParam("q")
	v := views.SearchPage{Limit: searchLimit, Query: strings.TrimSpace(q)}
	v.Page = s.page(c, "Search", "")
	v.Page.Search = strings.ToValidUTF8(q, "\uFFFD")
	if v.Query == "" {
		v.Hints = true
		return renderPage(c, http.StatusOK, views.SearchView(v), views.SearchContent(v))
	}
	v.Page.Title = "Search: " + views.Cut(strings.ToValidUTF8(v.Query, "\uFFFD"), 60)
	ctx, cancel := s.withTimeout(c, 10*time.Second)
	defer cancel()
	res, err := s.broker.SearchIn(ctx, q, searchLimit, scopeOf(ctx))
	var be *broker.Error
	if errors.As(err, &be) && errors.Is(err, broker.ErrInvalid) {
		v.Query = strings.ToValidUTF8(v.Query, "\uFFFD")
		v.Page.Flash = &views.Flash{Kind: "error", Text: be.Message}
		v.Hints = true
		return renderPage(c, http.StatusBadRequest, views.SearchView(v), views.SearchContent(v))
	}
	if err != nil {
		return err
	}
	v.Tried = triedAs(res.As)
	if res.Hits, err = s.masksOf(c).searchHits(res.Hits); err != nil {
		return err
	}
	v.More = res.More
	if len(res.Hits) == 1 && !res.More {
		h := res.Hits[0]
		if h.IsDeadLetter {
			return c.Redirect(http.StatusSeeOther, deadLetterURL(h.Queue, h.MessageID(), h.Group))
		}
		m := messagePlaceOf(h)
		v.Single = &m
		v.Page.Title = "Message " + views.ShortID(m.ID)
		return renderPage(c, http.StatusOK, views.SearchView(v), views.SearchContent(v))
	}
	for _, h := range res.Hits {
		v.Rows = append(v.Rows, searchRowOf(h))
	}
	return renderPage(c, http.StatusOK, views.SearchView(v), views.SearchContent(v))
}

// triedAs says in words what a text was looked up as.
func triedAs(as []string) string {
	words := map[string]string{
		broker.MatchMessageID: "a message id", broker.MatchShortID: "a short message id",
		broker.MatchTransactionID: "a transactionId", broker.MatchTransactionPrefix: "the beginning of a transactionId",
		broker.MatchTraceID: "a traceId", broker.MatchText: "words in payloads and error texts",
	}
	var out []string
	for _, a := range as {
		out = append(out, words[a])
	}
	switch len(out) {
	case 0:
		return "nothing"
	case 1:
		return out[0]
	}
	return strings.Join(out[:len(out)-1], ", ") + " and " + out[len(out)-1]
}

func searchRowOf(h broker.SearchHit) views.SearchRow {
	id := h.MessageID()
	r := views.SearchRow{
		ID: id, Queue: h.Queue, QueueURL: queueURL(h.Queue), Partition: h.Partition, Group: h.Group, TxID: h.TransactionID,
		FailedAt: h.FailedAt, PushedAt: h.CreatedAt, IsDeadLetter: h.IsDeadLetter, Match: h.Match,
	}
	if h.Match == broker.MatchText {
		r.Match = "words in payload or error"
	}
	if h.IsDeadLetter {
		r.URL = deadLetterURL(h.Queue, id, h.Group)
		r.Error = views.FirstLine(h.Error, 200)
		return r
	}
	r.URL = searchURL(id)
	r.State = placesInShort(h.Places)
	return r
}

// placesInShort sums up where a message is: "pending in billing;
// settled in audit".
func placesInShort(ps []broker.GroupPlace) string {
	if len(ps) == 0 {
		return "no group reads its queue yet"
	}
	// By state, in the order of ps: "done in billing, shipping; waiting in audit".
	var order []string
	groups := map[string][]string{}
	for _, p := range ps {
		label := views.PlaceLabel(p.State)
		if _, ok := groups[label]; !ok {
			order = append(order, label)
		}
		groups[label] = append(groups[label], p.Group)
	}
	var parts []string
	for _, label := range order {
		parts = append(parts, label+" in "+strings.Join(groups[label], ", "))
	}
	return strings.Join(parts, "; ")
}

func messagePlaceOf(h broker.SearchHit) views.MessagePlace {
	id := h.MessageID()
	m := views.MessagePlace{
		ID: id, Match: h.Match, Queue: h.Queue, QueueURL: queueURL(h.Queue), DeadLettersURL: deadLettersURL(h.Queue, nil),
		Partition: h.Partition, PartitionID: h.PartitionKey, TxID: h.TransactionID, TraceID: h.TraceID, PushedAt: h.CreatedAt,
	}
	for _, p := range h.Places {
		m.Places = append(m.Places, views.PlaceRow{Group: p.Group, State: p.State, Note: placeNote(p)})
	}
	if h.ReplayedAs != "" {
		m.ReplayedAs, m.ReplayedAsURL = h.ReplayedAs, searchURL(h.ReplayedAs)
	}
	if broker.IsReplayTransaction(h.TransactionID) {
		m.OriginalID = strings.TrimPrefix(h.TransactionID, broker.ReplayPrefix)
		m.OriginalURL = searchURL(m.OriginalID)
	}
	return m
}

// placeNote says what a group's state means for the message.
func placeNote(p broker.GroupPlace) string {
	switch p.State {
	case broker.PlaceSettled:
		return "the group is past it: it completed, or it was dropped, or dead-lettered and then replayed or deleted (the audit says which)"
	case broker.PlaceLeased:
		if p.Retries > 0 {
			return "delivered and being processed, after " + views.Plural(int64(p.Retries), "failed try", "failed tries")
		}
		return "delivered and being processed"
	case broker.PlaceRetrying:
		return views.Plural(int64(p.Retries), "failed try", "failed tries") + " so far; it waits for its next try"
	}
	return "not delivered to the group yet"
}
