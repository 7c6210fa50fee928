package web

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/views"
)

// Export formats: one JSON object a line (the API's dead letter, the
// payload as data, last), or CSV with a header row.
const (
	formatNDJSON = "ndjson"
	formatCSV    = "csv"
)

// exportStall is how long an export waits for a client that reads
// nothing before it gives up on it: the write deadline, moved on at
// every page (the server's own WriteTimeout would end a long export).
const exportStall = time.Minute

// exportPage streams the dead letters of a queue that the list's filter
// selects (the list's parameters, parsed as the list parses them; page
// and size are ignored) as a download. It is a GET, so that the list's
// Export links are plain links, and changes nothing but the audit; a
// request another site started (Sec-Fetch-Site: cross-site, the only kind
// a browser sends the Lax session cookie with) is refused, so that no
// other site can make a browser download personal data or write
// exports into the audit in someone's name.
func (s *Server) exportPage(c echo.Context) error {
	if c.Request().Header.Get("Sec-Fetch-Site") == "cross-site" {
		return &apiError{status: http.StatusForbidden, message: "An export starts from the dead-letter list of this dashboard: open the list and use Export."}
	}
	queue, err := pathParam(c, "queue")
	if err != nil {
		return err
	}
	q, err := parseListFilter(c.QueryParams()).query(queue, s.now())
	if err != nil {
		return err
	}
	return s.export(c, q)
}

// exportAPI is GET /api/v1/dlq/export: the dead letters GET /api/v1/dlq
// selects (its parameters; limit and offset are ignored), all of them.
func (s *Server) exportAPI(c echo.Context) error {
	q, err := parseDLQQuery(c)
	if err != nil {
		return err
	}
	return s.export(c, q)
}

// export writes every dead letter q selects in the format the query asks
// for, a page at a time, flushed after each; the broker records it in
// the audit. An error before the first byte is answered as usual; one
// after it aborts the connection, so that the client sees a broken
// download rather than a file that looks whole.
func (s *Server) export(c echo.Context, q broker.DLQQuery) error {
	q.Scope = scopeOf(c.Request().Context())
	format := c.QueryParam("format")
	if format == "" {
		format = formatNDJSON
	}
	// Payloads are masked (mask.go) unless an admin asks for them
	// revealed, which the export's audit entries say.
	masks := s.masksOf(c)
	revealed, err := revealParam(c, "revealed")
	if err != nil {
		return err
	}
	audited := strings.ToUpper(format)
	if revealed {
		if p, _ := principalFrom(c.Request().Context()); !p.Role.Allows(RoleAdmin) {
			return &apiError{status: http.StatusForbidden, message: "not allowed: an export with the masked fields revealed needs the admin role"}
		}
		masks, audited = nil, audited+" (masked fields revealed)"
	} else if err := masks.query(q); err != nil {
		return err
	} else if err := masks.check(); err != nil {
		return err
	}
	var enc exportEncoder
	switch format {
	case formatNDJSON:
		enc = &ndjsonEncoder{}
	case formatCSV:
		enc = newCSVEncoder()
	default:
		return badRequest("format must be ndjson or csv")
	}
	w := c.Response()
	rc := http.NewResponseController(w)
	start := func() error {
		if w.Committed {
			return nil
		}
		h := w.Header()
		h.Set(echo.HeaderContentType, enc.contentType())
		h.Set(echo.HeaderContentDisposition, `attachment; filename="`+exportFileName(q, s.now(), format)+`"`)
		h.Set("Cache-Control", "no-store") // personal data: not kept by the browser or a proxy
		w.WriteHeader(http.StatusOK)
		_, err := w.Write(enc.header())
		return err
	}
	if isHead(c.Request()) {
		// The headers of the download, and nothing read or audited: no
		// dead letter leaves the server.
		return start()
	}
	res, err := s.broker.Export(c.Request().Context(), q, audited, actor(c), func(page []broker.DeadLetter) (int, error) {
		_ = rc.SetWriteDeadline(time.Now().Add(exportStall))
		if err := start(); err != nil {
			return 0, err
		}
		for i, d := range page {
			d.Payload = maskedData(masks, d.Queue, d.Payload)
			line, err := enc.row(d)
			if err != nil {
				return i, err
			}
			if _, err := w.Write(line); err != nil {
				return i, err
			}
		}
		err := rc.Flush()
		if s.exportHook != nil {
			s.exportHook(c.Request().Context(), false, 0)
		}
		return len(page), err
	})
	if s.exportHook != nil {
		s.exportHook(c.Request().Context(), true, res.Rows)
	}
	if err != nil && !w.Committed {
		return err
	}
	if err != nil || !res.Complete {
		s.log.InfoContext(c.Request().Context(), "export cut off", "rows", res.Rows, "err", err)
		panic(http.ErrAbortHandler)
	}
	return start() // an empty export: the headers, and the CSV's header row
}

// exportEncoder writes dead letters as lines of a format.
type exportEncoder interface {
	contentType() string
	header() []byte
	// row encodes d; the slice is valid until the next call.
	row(d broker.DeadLetter) ([]byte, error)
}

// ndjsonEncoder writes the API's dead letter object (GET /api/v1/dlq's
// messages), one a line. The payload, data, comes last, byte for byte as
// pushed, unless it holds a line break (pretty-printed JSON): it is then
// compacted, the same JSON without the whitespace between its tokens.
type ndjsonEncoder struct{ buf bytes.Buffer }

func (*ndjsonEncoder) contentType() string { return "application/x-ndjson; charset=utf-8" }
func (*ndjsonEncoder) header() []byte      { return nil }

func (e *ndjsonEncoder) row(d broker.DeadLetter) ([]byte, error) {
	e.buf.Reset()
	v := newDeadLetterView(d, nil) // d's payload is masked already
	v.Data = nil
	enc := json.NewEncoder(&e.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(exportLine{v}); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	// {...}\n → {...,"data":<payload>}\n
	e.buf.Truncate(e.buf.Len() - 2)
	e.buf.WriteString(`,"data":`)
	if bytes.ContainsAny(d.Payload, "\r\n") {
		if err := json.Compact(&e.buf, d.Payload); err != nil {
			return nil, fmt.Errorf("export: payload of %s: %w", d.MessageID(), err)
		}
	} else {
		e.buf.Write(d.Payload)
	}
	e.buf.WriteString("}\n")
	return e.buf.Bytes(), nil
}

// exportLine is a dead letter without its data, which row appends.
type exportLine struct {
	deadLetterView
}

// MarshalJSON leaves data out.
func (l exportLine) MarshalJSON() ([]byte, error) {
	type plain deadLetterView
	return json.Marshal(struct {
		plain
		Data json.RawMessage `json:"data,omitempty"`
	}{plain: plain(l.deadLetterView)})
}

// csvColumns are the columns of a CSV export, in order.
var csvColumns = []string{"id", "transactionId", "queue", "partition", "partitionId", "consumerGroup",
	"errorMessage", "errorSentBytes", "retryCount", "data", "traceId", "createdAt", "failedAt", "isReplay"}

// csvEncoder writes a header row and a row a dead letter with
// encoding/csv. The payload is its JSON text as pushed. Cells are text
// that strangers wrote (payloads, errors, ids) opened in spreadsheets:
// one that starts with = + - @, a tab or a carriage return gets a
// leading ' so that no spreadsheet takes it for a formula (OWASP's CSV
// injection advice); a reader that wants the value back drops a ' that
// comes before one of those characters.
type csvEncoder struct {
	buf bytes.Buffer
	w   *csv.Writer
}

func newCSVEncoder() *csvEncoder {
	e := &csvEncoder{}
	e.w = csv.NewWriter(&e.buf)
	return e
}

func (*csvEncoder) contentType() string { return "text/csv; charset=utf-8" }

func (e *csvEncoder) header() []byte {
	e.buf.Reset()
	_ = e.w.Write(csvColumns)
	e.w.Flush()
	return bytes.Clone(e.buf.Bytes())
}

func (e *csvEncoder) row(d broker.DeadLetter) ([]byte, error) {
	e.buf.Reset()
	sent := ""
	if _, n, ok := d.ErrorCut(); ok {
		sent = strconv.Itoa(n)
	}
	id := d.MessageID()
	cells := []string{id, d.TransactionID, d.Queue, d.Partition, d.PartitionKey, d.Group,
		d.Error, sent, strconv.Itoa(d.RetryCount), string(d.Payload), d.TraceID,
		d.CreatedAt.UTC().Format(timeFormat), d.FailedAt.UTC().Format(timeFormat), strconv.FormatBool(d.IsReplay())}
	for i, v := range cells {
		cells[i] = csvSafe(v)
	}
	if err := e.w.Write(cells); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	e.w.Flush()
	return e.buf.Bytes(), e.w.Error()
}

// csvSafe defuses a cell a spreadsheet would read as a formula: one that
// starts with = + - @, a tab, CR or LF (OWASP's list), or their
// full-width forms, which some spreadsheets take for the same.
func csvSafe(v string) string {
	r, _ := utf8.DecodeRuneInString(v)
	if v != "" && strings.ContainsRune("=+-@\t\r\n\uff1d\uff0b\uff0d\uff20", r) {
		return "'" + v
	}
	return v
}

// exportFileName names an export's file after its filter and when it was
// made: lazarus-orders-billing-error-timeout-2026-12-01T0930Z.ndjson.
// Only letters, digits, '.', '_' and '-' go in (anything else becomes
// '-'), each value cut to 40 characters.
func exportFileName(q broker.DLQQuery, now time.Time, ext string) string {
	parts := []string{"lazarus"}
	add := func(prefix, v string) {
		if v = fileNamePart(v); v != "" {
			parts = append(parts, prefix+v)
		}
	}
	add("", q.Queue)
	add("", q.Group)
	add("partition-", q.Partition)
	if !q.From.IsZero() {
		add("from-", q.From.UTC().Format("2006-01-02T1504Z"))
	}
	if !q.To.IsZero() {
		add("to-", q.To.UTC().Format("2006-01-02T1504Z"))
	}
	add("error-", q.ErrorContains)
	add("tx-", q.TransactionID)
	add("errorgroup-", q.Fingerprint)
	add("version-", q.ConsumerVersion)
	add("text-", q.Text)
	for _, f := range q.Fields {
		add("field-", f)
	}
	parts = append(parts, now.UTC().Format("2006-01-02T1504Z"))
	return strings.Join(parts, "-") + "." + ext
}

// fileNamePart keeps the safe characters of v, the others made '-'
// (runs of them one), trimmed of '-' and '.', at most 40 bytes.
func fileNamePart(v string) string {
	var b strings.Builder
	dash := false
	for _, r := range v {
		safe := r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
		if !safe || r == '-' {
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = true
			continue
		}
		b.WriteRune(r)
		dash = false
		if b.Len() >= 40 {
			break
		}
	}
	return strings.Trim(b.String(), "-.")
}

// errorCutNote is "cut at 8 KiB of 23 KiB" for a dead letter whose error
// was cut to be kept, else "".
func errorCutNote(d broker.DeadLetter) string {
	if kept, sent, ok := d.ErrorCut(); ok {
		return views.ErrorCut(kept, sent)
	}
	return ""
}

// deadLetterPartURL is the download of a dead letter's payload or error.
func deadLetterPartURL(queue, id, group, part string) string {
	u := deadLettersURL(queue, nil) + "/" + url.PathEscape(id) + "/" + part
	if group != "" {
		u += "?" + url.Values{"group": {group}}.Encode()
	}
	return u
}

// downloadPayload sends a dead letter's payload, byte for byte as pushed
// but for its queue's masked fields (•••: the page's Reveal shows them),
// as <id>.json; downloadError its whole error text as <id>-error.txt.
// For viewers, who see both on the page.
func (s *Server) downloadPayload(c echo.Context) error { return s.downloadPart(c, "payload") }

func (s *Server) downloadError(c echo.Context) error { return s.downloadPart(c, "error") }

func (s *Server) downloadPart(c echo.Context, part string) error {
	_, id, d, err := s.pathDeadLetter(c.Request().Context(), c)
	if err != nil {
		return err
	}
	masks := s.masksOf(c)
	name, body, ctype := fileNamePart(id)+".json", []byte(masks.payload(d.Queue, d.Payload)), "application/json"
	if err := masks.check(); err != nil {
		return err
	}
	if part == "error" {
		name, body, ctype = fileNamePart(id)+"-error.txt", []byte(d.Error), "text/plain; charset=utf-8"
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	h.Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, ctype, body)
}
