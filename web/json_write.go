package web

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/broker"
	"github.com/lazarus-dlq/lazarus/internal/jsonscan"
)

// The answers to a push, a pop and an ack are written by hand, straight
// from the broker's results, without building views or maps: byte for
// byte what writeJSON made of the views (json_write_test.go compares
// them), the newline after the value included.

// answerBuffers keeps the buffers the answers are written into, and the
// pages (render).
var answerBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxPooledAnswer is the largest buffer kept for the next answer.
const maxPooledAnswer = 1 << 20

// writeAppended answers with the JSON body that write appends to a
// buffer (nil and an error: nothing is written, the error is answered).
func writeAppended(c echo.Context, status int, write func([]byte) ([]byte, error)) error {
	bp := answerBuffers.Get().(*[]byte)
	b, err := write((*bp)[:0])
	if err == nil {
		err = c.Blob(status, echo.MIMEApplicationJSON, b) // copied into the connection's buffer
	}
	putAnswerBuffer(bp, b)
	return err
}

// putAnswerBuffer gives bp back to answerBuffers holding b, the buffer it
// grew to, unless b is over maxPooledAnswer.
func putAnswerBuffer(bp *[]byte, b []byte) {
	if cap(b) <= maxPooledAnswer {
		*bp = b[:0]
		answerBuffers.Put(bp)
	}
}

// appendPushResults writes a push's answer (pushResultView, a list).
func appendPushResults(b []byte, rs []broker.PushResult) []byte {
	b = append(b, '[')
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"status":`...)
		b = appendString(b, r.Status)
		b = append(b, `,"message_id":`...)
		b = appendString(b, r.MessageID)
		b = append(b, `,"transaction_id":`...)
		b = appendString(b, r.TransactionID)
		b = append(b, `,"partition_id":`...)
		b = appendString(b, r.PartitionID)
		b = append(b, `,"queue":`...)
		b = appendString(b, r.Queue)
		b = append(b, `,"partition":`...)
		b = appendString(b, r.Partition)
		b = append(b, '}')
	}
	return append(b, "]\n"...)
}

// errBadPayload is a stored payload that is not JSON: encoding/json
// refused to write it too (an internal error).
var errBadPayload = errors.New("encode response: a stored payload is not valid JSON")

// appendPop writes a pop's answer: the messages, the lease and its end.
func appendPop(b []byte, res broker.PopResult) ([]byte, error) {
	b = append(b, `{"messages":[`...)
	for i := range res.Messages {
		d := &res.Messages[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":"`...)
		b = broker.AppendMessageID(b, d.CreatedAt, d.Seq) // hex digits and dashes: nothing to escape
		b = append(b, '"')
		b = append(b, `,"transactionId":`...)
		b = appendString(b, d.TransactionID)
		b = append(b, `,"partitionId":`...)
		b = appendString(b, d.PartitionUUID)
		b = append(b, `,"partition":`...)
		b = appendString(b, d.Partition)
		b = append(b, `,"queue":`...)
		b = appendString(b, d.Queue)
		b = append(b, `,"leaseId":`...)
		b = appendOptional(b, d.LeaseID)
		b = append(b, `,"consumerGroup":`...)
		b = appendString(b, d.Group)
		b = append(b, `,"data":`...)
		var ok bool
		if b, ok = appendCompact(b, d.Payload); !ok {
			return nil, errBadPayload
		}
		b = append(b, `,"createdAt":`...)
		b = appendTime(b, d.CreatedAt)
		b = append(b, `,"retryCount":`...)
		b = strconv.AppendInt(b, int64(d.RetryCount), 10)
		b = append(b, `,"traceId":`...)
		b = appendOptional(b, d.TraceID)
		b = append(b, '}')
	}
	b = append(b, `],"leaseId":`...)
	b = appendOptional(b, res.LeaseID)
	b = append(b, `,"leaseExpiresAt":`...)
	b = appendTime(b, res.LeaseUntil)
	return append(b, "}\n"...), nil
}

// appendAckResults writes a batch ack's answer (ackResultView, a list).
func appendAckResults(b []byte, rs []broker.AckResult) []byte {
	b = append(b, '[')
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		success, errText := ackOutcome(r)
		b = append(b, `{"transactionId":`...)
		b = appendString(b, r.TransactionID)
		b = append(b, `,"success":`...)
		b = strconv.AppendBool(b, success)
		b = append(b, `,"error":`...)
		b = appendOptional(b, errText)
		b = append(b, `,"dlq":`...)
		b = strconv.AppendBool(b, r.DLQ)
		b = append(b, `,"dropped":`...)
		b = strconv.AppendBool(b, r.Dropped)
		b = append(b, `,"requeued":`...)
		b = strconv.AppendBool(b, r.Requeued)
		b = append(b, '}')
	}
	return append(b, "]\n"...)
}

// appendAck writes one ack's answer (ackResponse).
func appendAck(b []byte, r ackResponse) []byte {
	b = append(b, `{"transactionId":`...)
	b = appendString(b, r.TransactionID)
	b = append(b, `,"status":`...)
	b = appendString(b, r.Status)
	b = append(b, `,"consumerGroup":`...)
	b = appendString(b, r.ConsumerGroup)
	b = append(b, `,"success":`...)
	b = strconv.AppendBool(b, r.Success)
	if r.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, r.Error)
	}
	b = append(b, `,"dlq":`...)
	b = strconv.AppendBool(b, r.DLQ)
	b = append(b, `,"dropped":`...)
	b = strconv.AppendBool(b, r.Dropped)
	b = append(b, `,"requeued":`...)
	b = strconv.AppendBool(b, r.Requeued)
	b = append(b, `,"acknowledgedAt":`...)
	b = appendTime(b, time.Time(r.AcknowledgedAt))
	return append(b, "}\n"...)
}

// appendTime writes a time as timestamp does: null for the zero time.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, timeFormat)
	return append(b, '"')
}

// appendOptional writes a string as optional does: null when empty.
func appendOptional(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string as encoding/json does without
// HTML escaping: '"', '\\' and control characters escaped (\b, \f, \n,
// \r, \t by name, the others as \u00XX), invalid UTF-8 as \ufffd, and
// U+2028 and U+2029 as \u2028 and \u2029.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Plain ASCII goes as it is, found eight bytes at a time.
		if i = jsonscan.PlainEnd(s, i, true); i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendCompact writes a payload as encoding/json writes a RawMessage:
// checked, and without the white space between its tokens (none inside
// strings is touched); null when there is none. false when it is not one
// valid JSON value.
func appendCompact(b []byte, raw []byte) ([]byte, bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	// The fast decoder gives up on nesting past maxFastDepth too:
	// encoding/json decides those. A payload it read without white
	// space between its tokens (as most are stored) is copied as it is.
	d := fastDecoder{jsonscan.Scanner{B: raw}}
	if d.value(0) && d.End() {
		if !d.Spaced {
			return append(b, raw...), true
		}
	} else if !json.Valid(raw) {
		return b, false
	}
	inString := false
	start := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ' ', '\t', '\n', '\r':
			b = append(b, raw[start:i]...)
			start = i + 1
		}
	}
	return append(b, raw[start:]...), true
}
