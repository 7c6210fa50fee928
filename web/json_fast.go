package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lazarus-dlq/lazarus/internal/jsonscan"
)

// The hot bodies (a push, an ack, a batch of acks) are decoded by hand,
// without reflection, in one pass over the body that also checks each
// payload's JSON syntax. The hand decoders are a fast path only: on
// anything they do not handle exactly as encoding/json's strict decoding
// would (an error of any kind, null, a duplicate or case-folded key, a
// string with escapes they do not undo themselves, deep nesting), they
// give up and the body goes through decodeJSON's reflective decoder
// (decodeReader), which decides and words the error. So a body is
// accepted with the same values, or refused with the same message, as
// before; json_fast_test.go's differential fuzz tests check that the fast
// path agrees with the reflective one wherever it accepts.

// maxFastDepth is the nesting of a payload the fast path takes; deeper
// ones go to encoding/json, which refuses a document nested more than
// 10,000 levels.
const maxFastDepth = 1000

// decodeFast reads the request body and decodes it with fast, or, where
// fast gives up, with the reflective decoder into dst (decodeReader: the
// same rules and messages as decodeJSON).
func decodeFast(c echo.Context, dst any, fast func([]byte) bool) error {
	r := c.Request()
	body, err := readBody(r)
	if err != nil {
		// What encoding/json's decoder would have seen: the bytes that came,
		// then the error (a body over the cap, a timeout), so that the answer
		// is the one decodeJSON gave.
		return decodeReader(io.MultiReader(bytes.NewReader(body), errReader{err}), dst)
	}
	if fast(body) {
		return nil
	}
	return decodeReader(bytes.NewReader(body), dst)
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// maxBodyUpFront is the most readBody allocates before the bytes come: a
// Content-Length is a promise, and a client that makes it and sends
// nothing must not hold a buffer of the whole cap.
const maxBodyUpFront = 64 << 10

// readBody reads the whole body, in one allocation when the request says
// its length and it is at most maxBodyUpFront.
func readBody(r *http.Request) ([]byte, error) {
	n := r.ContentLength
	if n < 0 || n > maxBodyUpFront {
		n = 512
	}
	buf := make([]byte, 0, n+1) // +1: the read that finds the end
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// fastPush decodes a push body into req; false when it gives up.
func fastPush(body []byte, req *pushRequest) bool {
	d := fastDecoder{jsonscan.Scanner{B: body}}
	if !d.pushBody(req) || !d.End() {
		*req = pushRequest{}
		return false
	}
	return true
}

func (d *fastDecoder) pushBody(req *pushRequest) bool {
	empty, ok := d.open('{', '}')
	if !ok || empty {
		return ok
	}
	if key, ok := d.key(); !ok || string(key) != "items" {
		return false
	}
	if req.Items, ok = fastArray(d, 16, d.pushItem); !ok {
		return false
	}
	more, ok := d.more('}') // a second member: a duplicate or unknown key
	return ok && !more
}

// pushItem reads an item into it; prev is the item before it, whose
// strings are shared where they are the same (a batch's queue and
// partition).
func (d *fastDecoder) pushItem(it, prev *pushItem) bool {
	empty, ok := d.open('{', '}')
	if !ok || empty {
		return ok
	}
	for more := true; more; { // a duplicate key: the last wins, as in encoding/json
		key, ok := d.key()
		if !ok {
			return false
		}
		var dst *string
		var same string
		switch string(key) {
		case "queue":
			dst, same = &it.Queue, prev.Queue
		case "partition":
			dst, same = &it.Partition, prev.Partition
		case "transactionId":
			dst = &it.TransactionID
		case "traceId":
			dst, same = &it.TraceID, prev.TraceID
		case "payload":
		case "producerSub": // dropped (pushItem.ProducerSub)
			if !d.value(0) {
				return false
			}
			if more, ok = d.more('}'); !ok {
				return false
			}
			continue
		default:
			return false
		}
		if dst != nil {
			if !d.string(dst, same) {
				return false
			}
		} else {
			d.Space()
			start := d.I
			if !d.value(0) {
				return false
			}
			it.Payload = json.RawMessage(d.B[start:d.I:d.I])
		}
		if more, ok = d.more('}'); !ok {
			return false
		}
	}
	return true
}

// ack decodes the members of one acknowledgement into a; prev is the one
// before it, whose strings are shared where they are the same (a batch's
// lease, partition, status and group).
func (d *fastDecoder) ack(a, prev *ackRequest) bool {
	empty, ok := d.open('{', '}')
	if !ok || empty {
		return ok
	}
	for more := true; more; { // a duplicate key: the last wins, as in encoding/json
		key, ok := d.key()
		if !ok {
			return false
		}
		var dst *string
		var same string
		switch string(key) {
		case "transactionId":
			dst = &a.TransactionID
		case "partitionId":
			dst, same = &a.PartitionID, prev.PartitionID
		case "leaseId":
			dst, same = &a.LeaseID, prev.LeaseID
		case "status":
			dst, same = &a.Status, prev.Status
		case "error":
			dst, same = &a.Error, prev.Error
		case "consumerGroup":
			dst, same = &a.ConsumerGroup, prev.ConsumerGroup
		case "consumerVersion":
			dst, same = &a.ConsumerVersion, prev.ConsumerVersion
		default:
			return false
		}
		if !d.string(dst, same) {
			return false
		}
		if more, ok = d.more('}'); !ok {
			return false
		}
	}
	return true
}

// fastAck decodes the body of one ack into req; false when it gives up.
func fastAck(body []byte, req *ackRequest) bool {
	d := fastDecoder{jsonscan.Scanner{B: body}}
	if !d.ack(req, &ackRequest{}) || !d.End() {
		*req = ackRequest{}
		return false
	}
	return true
}

// fastAckBatch decodes a batch of acks into req; false when it gives up.
func fastAckBatch(body []byte, req *ackBatchRequest) bool {
	d := fastDecoder{jsonscan.Scanner{B: body}}
	if !d.ackBatch(req) || !d.End() {
		*req = ackBatchRequest{}
		return false
	}
	return true
}

func (d *fastDecoder) ackBatch(req *ackBatchRequest) bool {
	empty, ok := d.open('{', '}')
	if !ok || empty {
		return ok
	}
	acks := false
	for more := true; more; {
		key, ok := d.key()
		if !ok {
			return false
		}
		switch string(key) {
		case "consumerGroup":
			if !d.string(&req.ConsumerGroup, "") {
				return false
			}
		case "consumerVersion":
			if !d.string(&req.ConsumerVersion, "") {
				return false
			}
		case "acknowledgments":
			if acks { // encoding/json would decode into the first one's elements
				return false
			}
			acks = true
			if req.Acknowledgments, ok = fastArray(d, 128, d.ack); !ok {
				return false
			}
		default:
			return false
		}
		if more, ok = d.more('}'); !ok {
			return false
		}
	}
	return true
}

// fastArray reads a JSON array whose elements item reads; item is given
// the element before, whose strings it may share.
func fastArray[T any](d *fastDecoder, capacity int, item func(it, prev *T) bool) ([]T, bool) {
	empty, ok := d.open('[', ']')
	if !ok {
		return nil, false
	}
	out := make([]T, 0, capacity)
	for more := !empty; more; {
		var zero T
		out = append(out, zero)
		// The first element is its own "before": still zero, it offers
		// only empty strings to share.
		prev := &out[max(len(out)-2, 0)]
		if !item(&out[len(out)-1], prev) {
			return nil, false
		}
		if more, ok = d.more(']'); !ok {
			return nil, false
		}
	}
	return out, true
}

// fastDecoder reads JSON from b at i. Its methods return false where it
// gives up: on invalid JSON, and on valid JSON it leaves to encoding/json.
// Its Scanner's Spaced tells appendCompact whether a value it copies has
// white space to take out (else it copies it as it is).
type fastDecoder struct {
	jsonscan.Scanner
}

// open reads the start of an object or array (open, then close at once
// when it is empty).
func (d *fastDecoder) open(open, close byte) (empty, ok bool) {
	if !d.Next(open) {
		return false, false
	}
	return d.Next(close), true
}

// more reads what follows a member or element: a comma (more) or close.
func (d *fastDecoder) more(close byte) (more, ok bool) {
	if d.Next(',') {
		return true, true
	}
	return false, d.Next(close)
}

// key reads an object's key and its colon. A key with an escape or a byte
// past ASCII gives up (encoding/json would unescape it).
func (d *fastDecoder) key() ([]byte, bool) {
	if !d.Next('"') {
		return nil, false
	}
	start := d.I
	for d.I < len(d.B) && d.B[d.I] != '"' {
		if c := d.B[d.I]; c == '\\' || c < 0x20 || c >= 0x80 {
			return nil, false
		}
		d.I++
	}
	if d.I == len(d.B) {
		return nil, false
	}
	key := d.B[start:d.I]
	d.I++
	return key, d.Next(':')
}

// string reads a string into dst: as it is when it is plain ASCII (same
// itself when it is the same, allocating nothing), through encoding/json
// when it has escapes or other bytes (so that invalid UTF-8 and lone
// surrogates become U+FFFD as there). null and other types give up.
func (d *fastDecoder) string(dst *string, same string) bool {
	if !d.Next('"') {
		return false
	}
	start := d.I
	plain := true
	for d.I < len(d.B) {
		c := d.B[d.I]
		switch {
		case c == '"':
			switch {
			case plain && string(d.B[start:d.I]) == same:
				*dst = same
			case plain:
				*dst = string(d.B[start:d.I])
			default:
				if json.Unmarshal(d.B[start-1:d.I+1], dst) != nil {
					return false
				}
			}
			d.I++
			return true
		case c == '\\':
			plain = false
			d.I += 2
			continue
		case c < 0x20:
			return false
		case c >= 0x80:
			plain = false
		}
		d.I++
	}
	return false
}

// value reads any JSON value at depth, checking its syntax as
// encoding/json's scanner does.
func (d *fastDecoder) value(depth int) bool {
	if depth > maxFastDepth {
		return false
	}
	d.Space()
	if d.I == len(d.B) {
		return false
	}
	switch c := d.B[d.I]; {
	case c == '{':
		d.I++
		if d.Next('}') {
			return true
		}
		for {
			d.Space()
			if !d.SkipString() || !d.Next(':') || !d.value(depth+1) {
				return false
			}
			if d.Next(',') {
				continue
			}
			return d.Next('}')
		}
	case c == '[':
		d.I++
		if d.Next(']') {
			return true
		}
		for {
			if !d.value(depth + 1) {
				return false
			}
			if d.Next(',') {
				continue
			}
			return d.Next(']')
		}
	case c == '"':
		return d.SkipString()
	case c == 't':
		return d.Literal("true")
	case c == 'f':
		return d.Literal("false")
	case c == 'n':
		return d.Literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return d.Number()
	}
	return false
}
