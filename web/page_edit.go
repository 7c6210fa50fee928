package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// Edit and replay (SPEC 4): an operator edits a dead letter's payload as
// JSON, previews the diff against the original, and replays the edited
// copy. The broker checks that the edit is JSON and keeps both versions;
// the size limit is the server's, as for a push.

// showEdit renders the edit page of a dead letter (?group= picks the
// group's): the original indented, and a textarea holding it.
func (s *Server) showEdit(c echo.Context) error {
	ctx, cancel := s.withTimeout(c, 10*time.Second)
	defer cancel()
	queue, id, d, err := s.pathDeadLetter(ctx, c)
	if err != nil {
		return err
	}
	v, err := s.editView(ctx, c, queue, id, d)
	if err != nil {
		return err
	}
	return renderPage(c, http.StatusOK, views.EditView(v), views.EditContent(v))
}

// previewEdit answers Preview (htmx): the diff of the edited text against
// the original, both indented; or, with 400, where the text is not JSON
// or that it is over the limit.
func (s *Server) previewEdit(c echo.Context) error {
	ctx, cancel := s.withTimeout(c, 10*time.Second)
	defer cancel()
	_, _, d, err := s.pathDeadLetter(ctx, c)
	if err != nil {
		return err
	}
	text, err := editText(c)
	if err != nil {
		return err
	}
	edited, p := s.readEdit(text)
	if p.Error != "" {
		return editRefused(c, p)
	}
	// The diff is of what the editor sees: the original masked, the
	// edit as typed (a ••• left in it keeps the real value on replay).
	masks := s.masksOf(c)
	shown := masks.payload(d.Queue, d.Payload)
	if err := masks.check(); err != nil {
		return err
	}
	p.Diff = views.LineDiff(originalText(views.MakePayload(shown, 0)), views.MakePayload(edited, 0).Pretty, views.DiffContext)
	return render(c, http.StatusOK, views.EditPreviewFragment(p))
}

// replayEdit replays the edited copy, as the form's mode says (every
// group, or own with ?group=: that group only), and leads back to the
// list with a flash that names the copy. A text that is not JSON, or is
// over the limit, is refused with 400 and changes nothing.
func (s *Server) replayEdit(c echo.Context) error {
	ctx, cancel := s.withTimeout(c, 10*time.Second)
	defer cancel()
	queue, id, d, err := s.pathDeadLetter(ctx, c)
	if err != nil {
		return err
	}
	o, err := s.formReplayOptions(c)
	if err != nil {
		return err
	}
	text, err := editText(c)
	if err != nil {
		return err
	}
	edited, p := s.readEdit(text)
	if p.Error != "" {
		if isFragment(c) {
			return editRefused(c, p)
		}
		v, err := s.editView(ctx, c, queue, id, d)
		if err != nil {
			return err
		}
		v.Text, v.Preview = text, &p
		return render(c, http.StatusBadRequest, views.EditView(v))
	}
	if o.Payload, err = s.masksOf(c).restore(queue, edited, d.Payload); err != nil {
		return err
	}
	res, err := s.broker.ReplayWith(ctx, id, o)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("Replayed an edited copy of %s %s as %s: pushed to the end of partition %s with transactionId %s.",
		views.ShortID(id), replayedTo(o, res.Groups), res.MessageID, res.Partition, res.TransactionID)
	if res.Status == broker.StatusDuplicate {
		msg = fmt.Sprintf("%s had been replayed already: its copy %s is in partition %s, without this edit; the dead letter is gone.",
			views.ShortID(id), res.TransactionID, res.Partition)
	}
	if err := s.setFlash(c, views.Flash{Kind: "ok", Text: msg}, ""); err != nil {
		return err
	}
	list := deadLettersURL(queue, url.Values{"group": {d.Group}})
	if isFragment(c) {
		c.Response().Header().Set("HX-Redirect", list)
		return c.NoContent(http.StatusOK)
	}
	return c.Redirect(http.StatusSeeOther, list)
}

// replayedTo says to whom a replay went: "to every group (billing,
// analytics)" or "to billing only".
func replayedTo(o broker.ReplayOptions, groups []string) string {
	if o.Mode == broker.ReplayOwnGroup {
		return "to " + strings.Join(groups, ", ") + " only"
	}
	return "to every group (" + strings.Join(groups, ", ") + ")"
}

// editRefused answers htmx with why an edit was refused, in the preview's
// place (HX-Retarget: app.js swaps Lazarus's own error answers).
func editRefused(c echo.Context, p views.EditPreview) error {
	c.Response().Header().Set("HX-Retarget", "#edit-preview")
	c.Response().Header().Set("HX-Reswap", "innerHTML")
	return render(c, http.StatusBadRequest, views.EditPreviewFragment(p))
}

// editView is the edit page's model.
func (s *Server) editView(ctx context.Context, c echo.Context, queue, id string, d broker.DeadLetterDetail) (views.EditDeadLetter, error) {
	readers, err := s.broker.Readers(ctx, queue)
	if err != nil {
		return views.EditDeadLetter{}, err
	}
	base := deadLettersURL(queue, nil) + "/" + url.PathEscape(id)
	q := "?" + url.Values{"group": {d.Group}}.Encode()
	masks := s.masksOf(c)
	orig := views.MakePayload(masks.payload(queue, d.Payload), 0)
	if err := masks.check(); err != nil {
		return views.EditDeadLetter{}, err
	}
	v := views.EditDeadLetter{
		Page: s.page(c, "Edit and replay "+views.ShortID(id), "overview",
			views.Crumb{Label: "Overview", URL: "/"}, views.Crumb{Label: queue, URL: queueURL(queue)},
			views.Crumb{Label: "Dead letters", URL: deadLettersURL(queue, nil)},
			views.Crumb{Label: views.ShortID(id), URL: deadLetterURL(queue, id, d.Group)}, views.Crumb{Label: "Edit"}),
		ID: id, Queue: queue, Group: d.Group, Partition: d.Partition,
		DetailURL:  deadLetterURL(queue, id, d.Group),
		PreviewURL: base + "/edit/preview" + q,
		PostURL:    base + "/edit",
		Original:   originalText(orig), OriginalIsJSON: orig.IsJSON, OriginalBinary: orig.Binary,
		AtCap: d.Replays.AtCap(), Replays: d.Replays.Replays, MaxReplays: d.Replays.Max,
		MaxPayload: s.maxPayload,
	}
	if !orig.Binary {
		v.Text = originalText(orig)
	}
	for _, o := range d.Others {
		v.OtherGroups = append(v.OtherGroups, o.Group)
	}
	v.Readers, v.CopyFor = readers, d.CopyFor
	if v.Completed, err = s.completedGroups(ctx, d.DeadLetter); err != nil {
		return views.EditDeadLetter{}, err
	}
	return v, nil
}

// originalText is the original payload as the edit page shows it:
// indented when it is JSON, else as it is (escaped when not text).
func originalText(p views.Payload) string {
	if p.IsJSON {
		return p.Pretty
	}
	return p.Raw
}

// editText is the form's payload field. A form Go cannot read (over its
// 10 MB cap for a form: the text of a payload near a large limit, URL
// encoded) is a 400 saying so, not an empty text.
func editText(c echo.Context) (string, error) {
	if err := c.Request().ParseForm(); err != nil {
		return "", badRequest("the form could not be read (a form is at most 10 MB, the edited text URL-encoded): %s", truncate(err.Error(), 100))
	}
	return c.Request().PostFormValue("payload"), nil
}

// readEdit reads the textarea's text: line breaks as the browser sends
// them (CR LF) become LF, which changes no JSON value (a JSON string
// holds no raw line break). The copy's payload is the rest, byte for
// byte. p.Error says why it cannot be one: empty, over the limit, not
// UTF-8, not JSON (with its line and column).
func (s *Server) readEdit(text string) (edited []byte, p views.EditPreview) {
	edited = []byte(strings.ReplaceAll(text, "\r\n", "\n"))
	p.Size = len(edited)
	switch {
	case len(bytes.TrimSpace(edited)) == 0:
		p.Error = "The edited payload is empty: write a JSON value (an object, an array, a string, a number, true, false or null)."
	case int64(len(edited)) > s.maxPayload:
		p.Error = fmt.Sprintf("The edited payload is %d bytes, over the limit of %d bytes per payload (%s): nothing was replayed.",
			len(edited), s.maxPayload, views.Bytes(int(s.maxPayload)))
	case !utf8.Valid(edited):
		p.Error = "The edited payload is not valid UTF-8: JSON text must be."
	default:
		p.Error = checkJSON(edited, &p)
	}
	return edited, p
}

// checkJSON says where b is not one JSON value ("" when it is): the
// line and column (from 1) and the byte offset; p gets the line.
func checkJSON(b []byte, p *views.EditPreview) string {
	var raw json.RawMessage
	err := json.Unmarshal(b, &raw)
	var syntax *json.SyntaxError
	if err == nil {
		return ""
	}
	if !errors.As(err, &syntax) {
		return "Not valid JSON."
	}
	what := strings.TrimPrefix(syntax.Error(), "json: ")
	// pos is the 0-based offset of the byte that gave it away (Offset
	// counts it); a text that ends too soon is pointed at just after its
	// last character.
	pos := int(min(max(syntax.Offset-1, 0), int64(len(b))))
	ended := syntax.Offset >= int64(len(b)) && strings.Contains(what, "unexpected end")
	if ended {
		pos = len(bytes.TrimRight(b, " \t\r\n"))
	}
	before := b[:pos]
	start := bytes.LastIndexByte(before, '\n') + 1
	p.Line = bytes.Count(before, []byte{'\n'}) + 1
	p.Column = utf8.RuneCount(before[start:]) + 1
	line := b[start:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	p.LineText = views.Cut(string(line), 200)
	if ended {
		return fmt.Sprintf("Not valid JSON: it ends too soon, at line %d, column %d (byte %d): a bracket, brace or quote is not closed.", p.Line, p.Column, pos+1)
	}
	return fmt.Sprintf("Not valid JSON at line %d, column %d (byte %d): %s", p.Line, p.Column, pos+1, views.Cut(what, 200))
}

// replayMode reads a replay's mode as the API and the forms spell it.
func replayMode(m string) (string, error) {
	switch m {
	case "", "every":
		return broker.ReplayEveryGroup, nil
	case broker.ReplayOwnGroup:
		return broker.ReplayOwnGroup, nil
	}
	return "", badRequest(`mode must be "every" (every group, the default) or "own" (only the group that gave up on it), got %q`, truncate(m, 32))
}

// formReplayOptions reads a page replay's mode and, with mode own, its
// group (form or query). A group beside every group means nothing: a
// form the button is in may carry one (a filter's), so it is left out.
func (s *Server) formReplayOptions(c echo.Context) (broker.ReplayOptions, error) {
	mode, err := replayMode(c.FormValue("mode"))
	if err != nil {
		return broker.ReplayOptions{}, err
	}
	o := broker.ReplayOptions{Actor: s.pageActor(c), Mode: mode}
	if mode == broker.ReplayOwnGroup {
		o.Group = c.FormValue("group")
	}
	if o.Force, err = formForce(c.FormValue("force")); err != nil {
		return o, err
	}
	return o, nil
}
