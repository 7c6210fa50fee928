package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// timeFormat is RFC 3339 with milliseconds; times are written in UTC.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// timestamp writes a time as RFC 3339 UTC with milliseconds, or null when
// it is the zero time.
type timestamp time.Time

// MarshalJSON implements json.Marshaler.
func (t timestamp) MarshalJSON() ([]byte, error) {
	if time.Time(t).IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + time.Time(t).UTC().Format(timeFormat) + `"`), nil
}

// optional is a string written as null when empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// writeJSON renders v into a buffer first, so that an encoding error never
// leaves half a response, and without HTML escaping: payloads go out as
// they came in.
func writeJSON(c echo.Context, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	return c.Blob(status, echo.MIMEApplicationJSON, buf.Bytes()) // UTF-8 by definition (RFC 8259)
}

// decodeJSON reads the request body, one JSON value, into dst. Unknown
// fields, wrong types and trailing data are refused with a message that
// names the field.
func decodeJSON(c echo.Context, dst any) error {
	return decodeReader(c.Request().Body, dst)
}

// decodeReader is decodeJSON over r: the reflective decoder, and the
// oracle of the hand-written ones (json_fast.go).
func decodeReader(r io.Reader, dst any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if berr := bodyError(err); berr != nil {
			return berr
		}
		return badRequest("malformed JSON: the body must hold a single JSON value")
	}
	return nil
}

// bodyError is the answer to a body that could not be read in full: too
// large (413, answered by handleError) or too slow (408: the server's read
// timeout passed); nil for other errors.
func bodyError(err error) error {
	var mb *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mb):
		return err
	case errors.As(err, &ne) && ne.Timeout():
		return &apiError{status: http.StatusRequestTimeout, message: "the request body did not arrive in time"}
	}
	return nil
}

// decodeError turns a json.Decoder error into one the caller can act on.
func decodeError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if berr := bodyError(err); berr != nil {
		return berr
	}
	switch {
	case errors.Is(err, io.EOF):
		return badRequest("request body is empty: a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed JSON: unexpected end of the body")
	case errors.As(err, &syntax):
		return badRequest("malformed JSON at byte %d: %s", syntax.Offset, strings.TrimPrefix(syntax.Error(), "json: "))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("request body must be %s, got %s", jsonType(typ.Type), typ.Value)
		}
		return badRequest("field %q must be %s, got %s", typ.Field, jsonType(typ.Type), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonType names the JSON type a Go type is read from.
func jsonType(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonType(t.Elem())
	}
	return "another type"
}

// pathParam is a path parameter, unescaped (see escapedPath).
func pathParam(c echo.Context, name string) (string, error) {
	v, err := url.PathUnescape(c.Param(name))
	if err != nil {
		return "", badRequest("path parameter %s is not validly escaped", name)
	}
	return v, nil
}

// queryInt reads an integer query parameter; def when absent.
func queryInt(c echo.Context, name string, def int) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, badRequest("query parameter %s must be a whole number, got %q", name, truncate(v, 32))
	}
	return n, nil
}

// queryBool reads a boolean query parameter; false when absent.
func queryBool(c echo.Context, name string) (bool, error) {
	v := c.QueryParam(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("query parameter %s must be true or false, got %q", name, truncate(v, 32))
	}
	return b, nil
}

// parseTime reads an RFC 3339 timestamp; the zero time when s is empty.
func parseTime(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, badRequest("%s must be an RFC 3339 timestamp (e.g. 2026-01-02T15:04:05Z), got %q", name, truncate(s, 64))
	}
	return t, nil
}

// truncate cuts s to at most n bytes on a rune boundary, for messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
